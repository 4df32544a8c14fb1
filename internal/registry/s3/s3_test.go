package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/registry/registrytest"
	"github.com/sluiceml/sluice/internal/registry/s3"
	"github.com/sluiceml/sluice/internal/registry/s3/s3test"
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// open returns a store on a fresh prefix of bucket at endpoint.
func open(t *testing.T, endpoint, bucket string, part int64) *s3.Artifacts {
	t.Helper()
	cfg, err := s3.Resolve("s3://"+bucket+"/t-"+randomHex(4), endpoint, false, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.PartBytes = part
	a, err := s3.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The registry's conformance suite of Artifacts, on a real S3 server.
func TestConformance(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t, endpoint)
	registrytest.RunArtifacts(t, func(t *testing.T) (registry.Artifacts, registrytest.Corrupt) {
		a := open(t, endpoint, bucket, 0)
		return a, func(t *testing.T, sha string, data []byte) {
			s3test.Overwrite(t, endpoint, bucket, a.Config().Key(sha), data)
		}
	})
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// Artifacts larger than a part go up as multipart uploads, checked before
// they appear: content that does not hash to its name leaves nothing, not
// even an incomplete upload. An intact object is not uploaded again.
func TestMultipart(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t, endpoint)
	ctx := t.Context()
	const part = s3.MinPartBytes
	for _, size := range []int64{2 * part, 2*part + 12345, part + 1} {
		a := open(t, endpoint, bucket, part)
		art := make([]byte, size)
		_, _ = rand.Read(art)
		sha := registrytest.SHA(art)
		// Wrong content of the same size first: refused, nothing left.
		other := bytes.Clone(art)
		other[size-1] ^= 1
		err := a.Put(ctx, sha, bytes.NewReader(other))
		if err == nil || !strings.Contains(err.Error(), "the content hashes to") {
			t.Fatalf("%d bytes: Put of other content = %v, want a hash refusal", size, err)
		}
		if _, _, err := a.Open(ctx, sha); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%d bytes: after a refused Put, Open = %v, want not exist", size, err)
		}
		for u := range s3test.Client(t, endpoint).ListIncompleteUploads(ctx, bucket, a.Config().Key(sha), true) {
			t.Errorf("%d bytes: an incomplete upload was left: %+v", size, u)
		}
		if err := a.Put(ctx, sha, struct{ io.Reader }{bytes.NewReader(art)}); err != nil { // no Len: a stream
			t.Fatalf("%d bytes: Put: %v", size, err)
		}
		got, err := registry.ReadArtifact(ctx, a, sha)
		if err != nil || !bytes.Equal(got, art) {
			t.Fatalf("%d bytes: read back %d bytes, %v", size, len(got), err)
		}
		again := &countingReader{r: bytes.NewReader(art)}
		if err := a.Put(ctx, sha, again); err != nil || again.n != 0 {
			t.Errorf("%d bytes: Put of an intact artifact read %d bytes of the content, %v; want none (no upload)", size, again.n, err)
		}
	}
}

// A corrupted object is refused with an error naming it, on Open and on
// the Put that repairs it.
func TestCorruptionNamesTheObject(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t, endpoint)
	ctx := t.Context()
	a := open(t, endpoint, bucket, 0)
	art := []byte("the real weights")
	sha := registrytest.SHA(art)
	if err := a.Put(ctx, sha, bytes.NewReader(art)); err != nil {
		t.Fatal(err)
	}
	s3test.Overwrite(t, endpoint, bucket, a.Config().Key(sha), []byte("other weights!!!"))
	_, err := registry.ReadArtifact(ctx, a, sha)
	if err == nil || !strings.Contains(err.Error(), "artifact sha256 mismatch") || !strings.Contains(err.Error(), a.Config().ObjectURL(sha)) {
		t.Errorf("reading a corrupted object: %v; want a mismatch naming %s", err, a.Config().ObjectURL(sha))
	}
}

// Open refuses to start on a missing bucket or refused credentials, with
// errors that name the fix and never the secret.
func TestOpenChecks(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t, endpoint)
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string {
			if v, ok := m[k]; ok {
				return v
			}
			return os.Getenv(k)
		}
	}
	for _, tc := range []struct {
		name, url string
		getenv    func(string) string
		want      []string
	}{
		{"missing bucket", "s3://no-such-bucket-" + randomHex(4) + "/x", os.Getenv, []string{"--artifacts", "does not exist", "create it"}},
		{"wrong secret", "s3://" + bucket + "/x", env("AWS_SECRET_ACCESS_KEY", "hunter2-wrong"), []string{"--artifacts", "refused the credentials", "AWS_SECRET_ACCESS_KEY"}},
		{"unknown key", "s3://" + bucket + "/x", env("AWS_ACCESS_KEY_ID", "nobody", "AWS_SECRET_ACCESS_KEY", "hunter2-wrong"), []string{"refused the credentials", "AWS_ACCESS_KEY_ID"}},
		{"anonymous", "s3://" + bucket + "/x", env("AWS_ACCESS_KEY_ID", "", "AWS_SECRET_ACCESS_KEY", "", "HOME", t.TempDir()), []string{"refused the credentials", "anonymous"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := s3.Resolve(tc.url, endpoint, false, tc.getenv)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s3.Open(t.Context(), cfg)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open = %v; want it to say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows the secret: %v", err)
			}
			if errors.Is(err, s3.ErrUnreachable) {
				t.Errorf("a refusal counts as unreachable (a worker would start on it): %v", err)
			}
		})
	}
}

// closedEndpoint is an http endpoint on 127.0.0.1 where nothing listens.
func closedEndpoint(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// A store that cannot be reached stops the start naming the endpoint's
// setting, and fails calls with 503 unavailable naming the store (no S3
// server needed: nothing listens there).
func TestUnreachable(t *testing.T) {
	endpoint := closedEndpoint(t)
	cfg, err := s3.Resolve("s3://models/prod", endpoint, false, func(k string) string {
		return map[string]string{"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "hunter2"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s3.Open(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "cannot reach the object store at "+endpoint+" (from --s3-endpoint)") || !errors.Is(err, s3.ErrUnreachable) {
		t.Errorf("Open = %v; want cannot reach ... (from --s3-endpoint), ErrUnreachable", err)
	}
	a, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	art := []byte("weights")
	sha := registrytest.SHA(art)
	for name, err := range map[string]error{
		"Put":    a.Put(ctx, sha, bytes.NewReader(art)),
		"Open":   func() error { _, _, err := a.Open(ctx, sha); return err }(),
		"Delete": a.Delete(ctx, sha),
	} {
		e := errs.As(err)
		if e.Code != errs.Unavailable || !strings.Contains(e.Message, "s3://models/prod at "+endpoint) || !strings.Contains(e.Message, "unavailable") {
			t.Errorf("%s = %s %q; want unavailable naming the store", name, e.Code, e.Message)
		}
		if e.RetryAfter == 0 {
			t.Errorf("%s: no Retry-After", name)
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "AKIAEXAMPLE") {
			t.Errorf("%s shows a credential: %v", name, err)
		}
	}
}

// stream is n pseudo-random bytes made as they are read (never held).
type stream struct {
	n, off int64
	x      uint64
}

func (s *stream) Read(p []byte) (int, error) {
	if s.off >= s.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), s.n-s.off)]
	for i := range p {
		s.x = s.x*6364136223846793005 + 1442695040888963407
		p[i] = byte(s.x >> 56)
	}
	s.off += int64(len(p))
	return len(p), nil
}

// A Put's memory is bounded by its parts, not the artifact: 64 MiB go up
// in parts of 5 MiB while the heap (sampled, with the collector kept
// close behind) grows by a few parts at most.
func TestPutMemoryIsBounded(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t, endpoint)
	const size, part = 64 << 20, s3.MinPartBytes
	h := sha256.New()
	if _, err := io.Copy(h, &stream{n: size}); err != nil {
		t.Fatal(err)
	}
	sha := hex.EncodeToString(h.Sum(nil))
	a := open(t, endpoint, bucket, part)
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				goruntime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
		}
	}()
	err := a.Put(t.Context(), sha, &stream{n: size})
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	grew := int64(peak) - int64(base)
	t.Logf("Put of %d MiB in parts of %d MiB: the heap grew by %.1f MiB at most", size>>20, part>>20, float64(grew)/(1<<20))
	if grew > 4*part {
		t.Errorf("Put of %d MiB grew the heap by %d MiB: more than 4 parts of %d MiB", size>>20, grew>>20, part>>20)
	}
	rc, n, err := a.Open(t.Context(), sha)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got, err := io.Copy(io.Discard, rc); err != nil || got != size || n != size {
		t.Errorf("read back %d bytes (size %d), %v", got, n, err)
	}
}
