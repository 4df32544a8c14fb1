package jobio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/minio/minio-go/v7"
)

// S3Store is an ObjectStore in one bucket of an S3-compatible server,
// over a minio-go client (the one internal/registry/s3 builds from
// --artifacts and its credentials). A part is an object under
// KEY.parts/: S3 makes a PUT visible whole or not at all, so the PUT is
// the commit; Publish streams the assembled output as one multipart
// upload, visible only once it completes.
type S3Store struct {
	cl     *minio.Client
	bucket string
	// PartBytes is the multipart part size of streamed uploads (default,
	// and minimum, 5 MiB): the memory one upload holds.
	PartBytes uint64
}

// NewS3Store returns the store of bucket.
func NewS3Store(cl *minio.Client, bucket string) *S3Store {
	return &S3Store{cl: cl, bucket: bucket}
}

type s3Object struct {
	*minio.Object
	size int64
}

func (o s3Object) Size() int64 { return o.size }

func (s *S3Store) uri(key string) string { return "s3://" + s.bucket + "/" + key }

func (s *S3Store) err(key string, err error) error {
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch er.Code {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%s: no such object; upload it first: %w", s.uri(key), errNotExist)
		case "NoSuchBucket":
			return fmt.Errorf("%s: bucket %q does not exist; create it or fix the URI: %w", s.uri(key), s.bucket, errNotExist)
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
			return fmt.Errorf("%s: access denied (%s); check the server's S3 credentials and the bucket policy", s.uri(key), er.Code)
		}
		if er.StatusCode == 404 {
			return fmt.Errorf("%s: not found: %w", s.uri(key), errNotExist)
		}
	}
	return fmt.Errorf("%s: %w", s.uri(key), err)
}

// Open opens key for streaming and ranged reads.
func (s *S3Store) Open(ctx context.Context, key string) (Object, error) {
	o, err := s.cl.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.err(key, err)
	}
	st, err := o.Stat()
	if err != nil {
		o.Close()
		return nil, s.err(key, err)
	}
	return s3Object{o, st.Size}, nil
}

// Parts returns the parts of the output at key.
func (s *S3Store) Parts(_ context.Context, key string) (PartStore, error) {
	return &s3Parts{s: s, prefix: key + ".parts/", out: key}, nil
}

type s3Parts struct {
	s      *S3Store
	prefix string
	out    string
}

// put streams write's bytes into one object.
func (p *s3Parts) put(ctx context.Context, key string, write func(io.Writer) error) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := write(pw)
		pw.CloseWithError(err)
		done <- err
	}()
	part := p.s.PartBytes
	if part < 5<<20 {
		part = 5 << 20
	}
	_, err := p.s.cl.PutObject(ctx, p.s.bucket, key, pr, -1, minio.PutObjectOptions{PartSize: part, ContentType: "application/octet-stream"})
	pr.CloseWithError(errors.New("upload ended")) // unblock the writer if the upload failed
	werr := <-done
	if werr != nil {
		return werr
	}
	if err != nil {
		return p.s.err(key, err)
	}
	return nil
}

func (p *s3Parts) Commit(ctx context.Context, name string, write func(io.Writer) error) error {
	if strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("part name %q: a plain name is needed", name)
	}
	return p.put(ctx, p.prefix+name, write)
}

func (p *s3Parts) Committed(ctx context.Context) ([]string, error) {
	var names []string
	for o := range p.s.cl.ListObjects(ctx, p.s.bucket, minio.ListObjectsOptions{Prefix: p.prefix}) {
		if o.Err != nil {
			return nil, p.s.err(p.prefix, o.Err)
		}
		names = append(names, path.Base(o.Key))
	}
	sortStrings(names)
	return names, nil
}

func (p *s3Parts) OpenPart(ctx context.Context, name string) (io.ReadCloser, error) {
	return p.s.Open(ctx, p.prefix+name)
}

// CleanStale aborts multipart uploads a crashed run left under the parts.
func (p *s3Parts) CleanStale(ctx context.Context) error {
	for u := range p.s.cl.ListIncompleteUploads(ctx, p.s.bucket, p.prefix, true) {
		if u.Err != nil {
			return p.s.err(p.prefix, u.Err)
		}
		if err := p.s.cl.RemoveIncompleteUpload(ctx, p.s.bucket, u.Key); err != nil {
			return p.s.err(u.Key, err)
		}
	}
	return nil
}

func (p *s3Parts) Publish(ctx context.Context, write func(io.Writer) error) error {
	return p.put(ctx, p.out, write)
}

// RemoveAll removes the objects under KEY.parts/.
func (p *s3Parts) RemoveAll(ctx context.Context) error {
	objs := p.s.cl.ListObjects(ctx, p.s.bucket, minio.ListObjectsOptions{Prefix: p.prefix, Recursive: true})
	for e := range p.s.cl.RemoveObjects(ctx, p.s.bucket, objs, minio.RemoveObjectsOptions{}) {
		if e.Err != nil {
			return p.s.err(e.ObjectName, e.Err)
		}
	}
	return nil
}
