package s3

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// Config says where the artifacts are and how to reach them. Resolve
// builds it from the flags and the environment; nothing in it is secret
// except Credentials, which String and every error leave out.
type Config struct {
	// URL is the --artifacts value, s3://bucket/prefix.
	URL    string
	Bucket string
	Prefix string // without leading or trailing "/"; "" for the bucket's root

	// Endpoint is the S3 API's base URL (http://127.0.0.1:8333,
	// https://s3.amazonaws.com) and EndpointFrom the flag or variable it
	// came from, for errors.
	Endpoint     string
	EndpointFrom string
	Region       string
	// PathStyle forces path-style requests (http://host/bucket/key); by
	// default Amazon's and Aliyun's hosts get virtual-host style and every
	// other endpoint path style.
	PathStyle bool
	// CABundle is a PEM file of certificate authorities to trust
	// (AWS_CA_BUNDLE) besides the system's.
	CABundle string

	Credentials Credentials

	// PartBytes is the size of an upload part and so the memory one Put
	// holds (two parts: the one being sent and the next; default
	// DefaultPartBytes, at least MinPartBytes).
	PartBytes int64
}

// Credentials are the keys requests are signed with.
type Credentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
	// Source says where they came from, for the log ("environment
	// (AWS_ACCESS_KEY_ID)", "shared credentials file ~/.aws/credentials",
	// "none: anonymous requests").
	Source string
	// SharedFile and Profile name the shared credentials file to read
	// when the environment has no keys; IAM says to ask the web
	// identity or container credentials endpoint (set when their
	// variables are).
	SharedFile, Profile string
	IAM                 bool
}

// String and GoString show where the keys came from, never the keys, so
// that no format verb prints a secret.
func (c Credentials) String() string   { return c.Source }
func (c Credentials) GoString() string { return "s3.Credentials{Source: " + c.Source + "}" }

// Upload part bounds: S3 refuses parts under 5 MiB but the last, and
// allows 10,000 parts, so DefaultPartBytes carries artifacts up to 160 GiB
// (registry.MaxArtifactBytes is 16 GiB).
const (
	MinPartBytes     int64 = 5 << 20
	DefaultPartBytes int64 = 16 << 20
)

// Flag and variable names, for errors that name the fix.
const (
	FlagArtifacts = "--artifacts"
	FlagEndpoint  = "--s3-endpoint"
)

// String describes the store without credentials: "s3://bucket/prefix at
// http://127.0.0.1:8333".
func (c Config) String() string {
	return c.URL + " at " + c.Endpoint
}

// Resolve reads the store's settings as the AWS tools do: the endpoint
// from endpointFlag, else AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else
// Amazon S3; the region from AWS_REGION, else AWS_DEFAULT_REGION, else
// us-east-1; the keys from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN, else the shared credentials file
// (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile AWS_PROFILE),
// else a web identity token or container credentials endpoint when their
// variables are set, else none (anonymous requests). getenv is os.Getenv
// outside tests. Every error names the flag or variable to fix.
func Resolve(rawURL, endpointFlag string, pathStyle bool, getenv func(string) string) (Config, error) {
	c := Config{URL: rawURL, PathStyle: pathStyle, PartBytes: DefaultPartBytes}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Config{}, fmt.Errorf("%s %q: use s3://BUCKET/PREFIX (leave %s out to keep artifacts in the --data folder)", FlagArtifacts, rawURL, FlagArtifacts)
	}
	c.Bucket = u.Host
	if err := s3utils.CheckValidBucketNameStrict(c.Bucket); err != nil {
		return Config{}, fmt.Errorf("%s %q: bucket %q: %v", FlagArtifacts, rawURL, c.Bucket, err)
	}
	c.Prefix = strings.Trim(u.Path, "/")
	if strings.Contains(c.Prefix, "//") || strings.Contains("/"+c.Prefix+"/", "/../") || strings.Contains("/"+c.Prefix+"/", "/./") {
		return Config{}, fmt.Errorf("%s %q: the prefix %q has an empty, . or .. segment", FlagArtifacts, rawURL, c.Prefix)
	}
	c.URL = "s3://" + c.Bucket
	if c.Prefix != "" {
		c.URL += "/" + c.Prefix
	}

	c.Endpoint, c.EndpointFrom = endpointFlag, FlagEndpoint
	for _, v := range []string{"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"} {
		if c.Endpoint == "" {
			c.Endpoint, c.EndpointFrom = getenv(v), v
		}
	}
	if c.Endpoint == "" {
		c.Endpoint, c.EndpointFrom = "https://s3.amazonaws.com", "the default (Amazon S3; set "+FlagEndpoint+" or AWS_ENDPOINT_URL for another store)"
	}
	e, err := url.Parse(c.Endpoint)
	switch {
	case err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "":
		return Config{}, fmt.Errorf("%s %q: use a URL like http://127.0.0.1:8333 or https://s3.example.com", c.EndpointFrom, c.Endpoint)
	case e.User != nil:
		// Never echo it: it may hold a secret.
		return Config{}, fmt.Errorf("%s: the endpoint URL must not carry credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead", c.EndpointFrom)
	case strings.Trim(e.Path, "/") != "" || e.RawQuery != "" || e.Fragment != "":
		return Config{}, fmt.Errorf("%s %q: the endpoint is a scheme and host only (the bucket and prefix go in %s)", c.EndpointFrom, c.Endpoint, FlagArtifacts)
	}
	c.Endpoint = e.Scheme + "://" + e.Host

	c.Region = getenv("AWS_REGION")
	if c.Region == "" {
		c.Region = getenv("AWS_DEFAULT_REGION")
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	c.CABundle = getenv("AWS_CA_BUNDLE")

	id, secret := getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")
	switch {
	case id != "" && secret != "":
		c.Credentials = Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: getenv("AWS_SESSION_TOKEN"), Source: "environment (AWS_ACCESS_KEY_ID)"}
	case id != "":
		return Config{}, fmt.Errorf("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not: set both, or neither to use the shared credentials file")
	case secret != "":
		return Config{}, fmt.Errorf("AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not: set both, or neither to use the shared credentials file")
	default:
		file := getenv("AWS_SHARED_CREDENTIALS_FILE")
		if file == "" {
			if home := getenv("HOME"); home != "" {
				file = filepath.Join(home, ".aws", "credentials")
			}
		}
		profile := getenv("AWS_PROFILE")
		if profile == "" {
			profile = "default"
		}
		switch {
		case file != "" && fileExists(file):
			c.Credentials = Credentials{SharedFile: file, Profile: profile, Source: "shared credentials file " + file + " (profile " + profile + ")"}
		case getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "" || getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI") != "" || getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") != "":
			c.Credentials = Credentials{IAM: true, Source: "web identity or container credentials (AWS_WEB_IDENTITY_TOKEN_FILE / AWS_CONTAINER_CREDENTIALS_*)"}
		default:
			c.Credentials = Credentials{Source: "none: anonymous requests (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to sign them)"}
		}
	}
	return c, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// Key is the object key of artifact sha: PREFIX/sha256/SHA.
func (c Config) Key(sha string) string {
	if c.Prefix == "" {
		return "sha256/" + sha
	}
	return c.Prefix + "/sha256/" + sha
}

// ObjectURL names the object of artifact sha in errors: s3://bucket/key.
func (c Config) ObjectURL(sha string) string {
	return "s3://" + c.Bucket + "/" + c.Key(sha)
}
