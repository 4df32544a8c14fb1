package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/sluiceml/sluice/internal/registry/s3"
)

// storeFlags are the object store settings `serve` and `worker` share
// (docs/operations.md, "Object store"). Credentials are read from the
// environment only, never from flags: arguments show in ps.
type storeFlags struct {
	url, endpoint string
	pathStyle     bool
}

func (s *storeFlags) register(f *pflag.FlagSet, worker bool) {
	if worker {
		f.StringVar(&s.url, "artifacts", "", "read artifacts directly from this object store, s3://BUCKET/PREFIX, as the control plane's sluice serve --artifacts (default: fetch them from the control plane)")
	} else {
		f.StringVar(&s.url, "artifacts", "", "keep artifacts in this S3-compatible object store, s3://BUCKET/PREFIX (objects PREFIX/sha256/SHA; credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN or ~/.aws/credentials, region from AWS_REGION); local --workers read it directly (default: the artifacts folder in --data)")
	}
	f.StringVar(&s.endpoint, "s3-endpoint", "", "the object store's S3 API, e.g. http://127.0.0.1:8333 (default: $AWS_ENDPOINT_URL_S3, then $AWS_ENDPOINT_URL, then Amazon S3)")
	f.BoolVar(&s.pathStyle, "s3-path-style", false, "send path-style requests (http://HOST/BUCKET/KEY) even to an endpoint that could take virtual-host style (default: path style for every endpoint but Amazon's and Aliyun's)")
}

// open returns the object store, checked (bucket, credentials), or nil
// without --artifacts. A store that does not answer stops the start unless
// unreachableOK (a worker: it can serve what its cache holds, and loads
// that need the store fail with its error until it is back).
func (s *storeFlags) open(ctx context.Context, log *slog.Logger, unreachableOK bool) (*s3.Artifacts, error) {
	if s.url == "" {
		if s.endpoint != "" || s.pathStyle {
			return nil, fmt.Errorf("--s3-endpoint and --s3-path-style need --artifacts s3://BUCKET/PREFIX")
		}
		return nil, nil
	}
	cfg, err := s3.Resolve(s.url, s.endpoint, s.pathStyle, os.Getenv)
	if err != nil {
		return nil, err
	}
	a, err := s3.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := a.Check(ctx); err != nil {
		if !unreachableOK || !errors.Is(err, s3.ErrUnreachable) {
			return nil, err
		}
		log.Warn("the object store does not answer; starting anyway: artifacts in the cache serve, loads that need the store fail until it is back", "err", err)
	}
	log.Info("artifacts in an object store", "artifacts", cfg.URL, "endpoint", cfg.Endpoint, "endpoint_from", cfg.EndpointFrom,
		"region", cfg.Region, "credentials", cfg.Credentials.Source)
	return a, nil
}

// args passes the settings on to local worker processes (the
// environment, credentials included, they inherit).
func (s *storeFlags) args() []string {
	if s.url == "" {
		return nil
	}
	out := []string{"--artifacts", s.url}
	if s.endpoint != "" {
		out = append(out, "--s3-endpoint", s.endpoint)
	}
	if s.pathStyle {
		out = append(out, "--s3-path-style")
	}
	return out
}
