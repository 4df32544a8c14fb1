// Package s3test gives tests a real S3-compatible server: the endpoint
// from SLUICE_S3_ENDPOINT (with the keys in AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY), as `make test-s3` sets them after starting
// SeaweedFS (scripts/start-seaweedfs.sh). Without it such tests skip in
// `make test` and fail in `make test-s3` (SLUICE_S3_REQUIRED=1): there is
// no in-memory stand-in.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Endpoint is the S3 endpoint the tests run against; it skips the test
// (or fails it under `make test-s3`) when there is none.
func Endpoint(t testing.TB) string {
	t.Helper()
	e := os.Getenv("SLUICE_S3_ENDPOINT")
	if e == "" {
		if os.Getenv("SLUICE_S3_REQUIRED") != "" {
			t.Fatal("SLUICE_S3_ENDPOINT is not set but SLUICE_S3_REQUIRED is: run `make test-s3`, which starts SeaweedFS (scripts/start-seaweedfs.sh) and sets it")
		}
		t.Skip("needs an S3-compatible server: run `make test-s3` (it builds and starts SeaweedFS and sets SLUICE_S3_ENDPOINT)")
	}
	return e
}

// Client is a minio-go client of endpoint with the environment's keys,
// for the tests' own setup and tampering (never the code under test).
func Client(t testing.TB, endpoint string) *minio.Client {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), ""),
		Secure: u.Scheme == "https", Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Bucket creates a bucket with a fresh name and, at cleanup, empties and
// removes it.
func Bucket(t testing.TB, endpoint string) string {
	t.Helper()
	c := Client(t, endpoint)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "sluice-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatalf("create bucket %s at %s: %v", name, endpoint, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for o := range c.ListObjects(ctx, name, minio.ListObjectsOptions{Recursive: true}) {
			if o.Err == nil {
				_ = c.RemoveObject(ctx, name, o.Key, minio.RemoveObjectOptions{})
			}
		}
		_ = c.RemoveBucket(ctx, name)
	})
	return name
}

// Overwrite replaces the object key in bucket with data, as someone
// writing to the bucket by hand (or a broken replication) would.
func Overwrite(t testing.TB, endpoint, bucket, key string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := Client(t, endpoint).PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("overwrite s3://%s/%s: %v", bucket, key, err)
	}
}
