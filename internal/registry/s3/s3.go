// Package s3 is registry.Artifacts in an S3-compatible object store
// (Amazon S3, MinIO, SeaweedFS, Ceph RGW, GCS's XML API), through
// github.com/minio/minio-go/v7: `sluice serve --artifacts s3://bucket/prefix`.
//
// Artifacts are content-addressed: artifact SHA is the object
// PREFIX/sha256/SHA, so several gateways and workers can share a bucket
// and an object, once written, never changes meaning. The store is trusted
// for nothing but keeping bytes:
//
//   - Every read is verified: Open's reader hashes what it streams and, in
//     place of io.EOF, returns an "artifact sha256 mismatch" error naming
//     the object when the bytes are not what the key says. A corrupted or
//     overwritten object is never served.
//   - Put verifies before the object appears. An artifact that fits in one
//     part is hashed in memory and sent in one PUT (signed with its SHA-256,
//     so the store checks it too). A larger one goes up as a multipart
//     upload that keeps its last part back until the whole stream has
//     hashed to SHA: a mismatch aborts the upload and nothing appears under
//     the key (S3 shows a multipart object only when it is completed). So
//     there are no temporary keys to clean up and no server-side copies,
//     and a Put holds at most two parts in memory (Config.PartBytes each),
//     whatever the artifact's size.
//   - Put is idempotent: when the object is there with the size of the
//     content (when the reader knows it) and its bytes hash to SHA, nothing
//     is uploaded (a read instead of a write). A damaged copy is replaced.
//
// Failures of the store (unreachable, 5xx, refused credentials, a deleted
// bucket) are errs.Unavailable (503) with a message naming the store and
// the fix and never a credential; a missing object also wraps
// fs.ErrNotExist, as for the folder store. Open checks the bucket and the
// credentials at start, so a typo stops `sluice serve` instead of failing
// the first push.
package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/registry"
)

// Artifacts is registry.Artifacts in one bucket and prefix.
type Artifacts struct {
	cfg  Config
	core minio.Core
}

var _ registry.Artifacts = (*Artifacts)(nil)

// Bounds of a request to the store. A store that does not answer fails a
// call in about StartTimeout at start and in seconds afterwards, not
// never; reading a large object is bounded by its caller's context.
const (
	StartTimeout  = 15 * time.Second
	dialTimeout   = 5 * time.Second
	headerTimeout = 30 * time.Second
	maxRetries    = 3
	smallBytes    = 256 << 10 // what Put reads before it allocates a part
)

// Open connects to the store cfg names and checks that its bucket exists
// and the credentials may list it, so a wrong bucket, endpoint or key
// stops the start with an error naming the flag or variable to fix.
func Open(ctx context.Context, cfg Config) (*Artifacts, error) {
	a, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := a.Check(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// New returns the store cfg names without contacting it.
func New(cfg Config) (*Artifacts, error) {
	if cfg.PartBytes == 0 {
		cfg.PartBytes = DefaultPartBytes
	}
	if cfg.PartBytes < MinPartBytes {
		return nil, fmt.Errorf("s3: part size %d bytes: S3 needs at least %d", cfg.PartBytes, MinPartBytes)
	}
	e, err := url.Parse(cfg.Endpoint)
	if err != nil || e.Host == "" {
		return nil, fmt.Errorf("%s %q: not a URL", cfg.EndpointFrom, cfg.Endpoint)
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: headerTimeout,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   16,
		// The body is read as it comes (it is hashed anyway): no
		// transparent gzip that would hide the stored bytes' size.
		DisableCompression: true,
	}
	if cfg.CABundle != "" {
		pem, err := os.ReadFile(cfg.CABundle)
		if err != nil {
			return nil, fmt.Errorf("AWS_CA_BUNDLE: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("AWS_CA_BUNDLE %s: no PEM certificate in it", cfg.CABundle)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	cl, err := minio.New(e.Host, &minio.Options{
		Creds:        credentialsOf(cfg.Credentials),
		Secure:       e.Scheme == "https",
		Transport:    tr,
		Region:       cfg.Region,
		BucketLookup: lookup,
		MaxRetries:   maxRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v", cfg.EndpointFrom, cfg.Endpoint, err)
	}
	return &Artifacts{cfg: cfg, core: minio.Core{Client: cl}}, nil
}

func credentialsOf(c Credentials) *credentials.Credentials {
	switch {
	case c.AccessKeyID != "":
		return credentials.NewStaticV4(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)
	case c.SharedFile != "":
		return credentials.NewFileAWSCredentials(c.SharedFile, c.Profile)
	case c.IAM:
		return credentials.NewIAM("")
	}
	return credentials.New(&credentials.Static{Value: credentials.Value{SignerType: credentials.SignatureAnonymous}})
}

// Client is the store's minio-go client: its endpoint, credentials and
// transport, for other objects than artifacts in the same store (batch
// jobs' s3:// inputs and outputs, internal/jobs/jobio.S3Store).
func (a *Artifacts) Client() *minio.Client { return a.core.Client }

// Config is the store's configuration.
func (a *Artifacts) Config() Config { return a.cfg }

// String describes the store without credentials.
func (a *Artifacts) String() string { return a.cfg.String() }

// Check lists at most one object under the prefix: it fails, naming the
// setting to fix, when the store cannot be reached, the bucket does not
// exist or the credentials are refused.
func (a *Artifacts) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	lctx, stop := context.WithCancel(ctx)
	objs := a.core.Client.ListObjects(lctx, a.cfg.Bucket, minio.ListObjectsOptions{Prefix: a.cfg.Key(""), MaxKeys: 1})
	var err error
	if o, ok := <-objs; ok {
		err = o.Err
	}
	stop()
	for range objs { // the lister ends when its context does
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: the object store at %s (%s) did not answer within %s: %w", FlagArtifacts, a.cfg.URL, a.cfg.Endpoint, a.cfg.EndpointFrom, StartTimeout, ErrUnreachable)
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch {
		case er.Code == "NoSuchBucket":
			return fmt.Errorf("%s %s: bucket %q does not exist at %s (%s): create it, or fix the bucket name (sluice never creates buckets)", FlagArtifacts, a.cfg.URL, a.cfg.Bucket, a.cfg.Endpoint, a.cfg.EndpointFrom)
		case credentialCode(er):
			return fmt.Errorf("%s %s: the object store at %s refused the credentials (%s): check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (credentials from %s)", FlagArtifacts, a.cfg.URL, a.cfg.Endpoint, s3Reason(er), a.cfg.Credentials.Source)
		case er.Code == "PermanentRedirect" || er.Code == "AuthorizationHeaderMalformed" || er.Code == "IllegalLocationConstraintException":
			return fmt.Errorf("%s %s: the object store at %s says the bucket is in another region or endpoint (%s): set AWS_REGION (now %s) or %s", FlagArtifacts, a.cfg.URL, a.cfg.Endpoint, s3Reason(er), a.cfg.Region, FlagEndpoint)
		}
		if er.StatusCode >= 500 {
			return fmt.Errorf("%s %s: the object store at %s failed to list the bucket (%s): %w", FlagArtifacts, a.cfg.URL, a.cfg.Endpoint, s3Reason(er), ErrUnreachable)
		}
		return fmt.Errorf("%s %s: the object store at %s refused to list the bucket (%s)", FlagArtifacts, a.cfg.URL, a.cfg.Endpoint, s3Reason(er))
	}
	return fmt.Errorf("%s %s: cannot reach the object store at %s (from %s): %s: %w", FlagArtifacts, a.cfg.URL, a.cfg.Endpoint, a.cfg.EndpointFrom, netReason(err), ErrUnreachable)
}

// ErrUnreachable is wrapped by Check's errors when the store did not
// answer or failed (5xx), as opposed to refusing the bucket or the
// credentials: a worker starts anyway and serves what its cache holds.
var ErrUnreachable = errors.New("the store may be down or the endpoint wrong")

// credentialCode says whether the store refused the request's signature
// or keys.
func credentialCode(er minio.ErrorResponse) bool {
	switch er.Code {
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken", "InvalidToken", "InvalidSecurity", "TokenRefreshRequired":
		return true
	}
	return er.StatusCode == http.StatusForbidden || er.StatusCode == http.StatusUnauthorized
}

func s3Reason(er minio.ErrorResponse) string {
	if er.Code == "" {
		return fmt.Sprintf("HTTP %d", er.StatusCode)
	}
	if er.Message == "" {
		return er.Code
	}
	return er.Code + ": " + er.Message
}

// netReason is a transport error without the request URL (which names
// the object and its query, never a credential, but is long).
func netReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func checkSHA(sha string) error {
	if !shaRE.MatchString(sha) {
		return fmt.Errorf("invalid artifact hash %q", sha)
	}
	return nil
}

// storeErr turns a failure of the store into an error a client may see.
// op is "read", "store" or "delete".
func (a *Artifacts) storeErr(op, sha string, err error) error {
	name := sha[:12]
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s artifact sha256:%s: %w", op, name, err)
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch {
		case er.Code == "NoSuchKey" || (er.StatusCode == http.StatusNotFound && er.Code != "NoSuchBucket"):
			return &errs.Error{Code: errs.Unavailable, Err: errors.Join(fs.ErrNotExist, err),
				Message: fmt.Sprintf("%s artifact sha256:%s: the artifact is missing from the object store (%s); publish its package again", op, name, a.cfg.ObjectURL(sha))}
		case er.Code == "NoSuchBucket":
			return &errs.Error{Code: errs.Unavailable, Err: err, RetryAfter: 30 * time.Second,
				Message: fmt.Sprintf("%s artifact sha256:%s: the bucket of the object store %s is gone; restore it (docs/operations.md, \"Object store\")", op, name, a.cfg)}
		case credentialCode(er):
			return &errs.Error{Code: errs.Unavailable, Err: err, RetryAfter: 30 * time.Second,
				Message: fmt.Sprintf("%s artifact sha256:%s: the object store %s refused the credentials (%s); check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN", op, name, a.cfg, s3Reason(er))}
		}
		return &errs.Error{Code: errs.Unavailable, Err: err, RetryAfter: 5 * time.Second,
			Message: fmt.Sprintf("%s artifact sha256:%s: the object store %s failed (%s); try again", op, name, a.cfg, s3Reason(er))}
	}
	return &errs.Error{Code: errs.Unavailable, Err: err, RetryAfter: 5 * time.Second,
		Message: fmt.Sprintf("%s artifact sha256:%s: the object store %s is unavailable (%s); try again when it is back", op, name, a.cfg, netReason(err))}
}

// Open streams the artifact; the reader verifies it (see the package doc).
func (a *Artifacts) Open(ctx context.Context, sha string) (io.ReadCloser, int64, error) {
	if err := checkSHA(sha); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("read artifact sha256:%s: %w", sha[:12], err)
	}
	body, info, _, err := a.core.GetObject(ctx, a.cfg.Bucket, a.cfg.Key(sha), minio.GetObjectOptions{})
	if err != nil {
		return nil, 0, a.storeErr("read", sha, err)
	}
	return &verifier{a: a, ctx: ctx, rc: body, sha: sha, size: info.Size, h: sha256.New()}, info.Size, nil
}

// verifier hashes an object's body as it is read and, at its end, returns
// the mismatch error instead of io.EOF when the bytes are not artifact sha.
type verifier struct {
	a    *Artifacts
	ctx  context.Context
	rc   io.ReadCloser
	sha  string
	size int64 // from the response; the bytes must match it too
	n    int64
	h    hash.Hash
	err  error // sticky
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.sha {
			v.err = fmt.Errorf("artifact sha256 mismatch: %s hashes to %s, not %s (the object was changed or corrupted in the bucket; it is not served: publish its package again to replace it)", v.a.cfg.ObjectURL(v.sha), got, v.sha)
			return n, v.err
		}
		if v.n != v.size {
			v.err = fmt.Errorf("read artifact sha256:%s: %s: got %d bytes, the store said %d", v.sha[:12], v.a.cfg.ObjectURL(v.sha), v.n, v.size)
			return n, v.err
		}
	case err != nil:
		if cerr := v.ctx.Err(); cerr != nil {
			err = cerr
		}
		v.err = v.a.storeErr("read", v.sha, err)
		return n, v.err
	}
	return n, err
}

func (v *verifier) Close() error { return v.rc.Close() }

// unread is a reader that knows how many bytes it has left
// (bytes.Reader, strings.Reader).
type unread interface{ Len() int }

// intact says whether the object of sha is there and hashes to sha. A
// missing object is (false, nil); a store that fails is the error.
func (a *Artifacts) intact(ctx context.Context, sha string, r io.Reader) (bool, error) {
	info, err := a.core.StatObject(ctx, a.cfg.Bucket, a.cfg.Key(sha), minio.StatObjectOptions{})
	if err != nil {
		var er minio.ErrorResponse
		if errors.As(err, &er) && (er.Code == "NoSuchKey" || er.StatusCode == http.StatusNotFound) && er.Code != "NoSuchBucket" {
			return false, nil
		}
		return false, a.storeErr("store", sha, err)
	}
	if l, ok := r.(unread); ok && int64(l.Len()) != info.Size {
		return false, nil
	}
	rc, _, err := a.Open(ctx, sha)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		if errs.CodeOf(err) == errs.Unavailable || ctx.Err() != nil {
			return false, err // the store failed: so would the upload
		}
		return false, nil // damaged: replace it
	}
	return true, nil
}

// Put stores the content of r as artifact sha unless an intact copy is
// there (see the package doc).
func (a *Artifacts) Put(ctx context.Context, sha string, r io.Reader) error {
	if err := checkSHA(sha); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store artifact sha256:%s: %w", sha[:12], err)
	}
	ok, err := a.intact(ctx, sha, r)
	if err != nil || ok {
		return err
	}
	// The first part: a small artifact costs its size (read into a
	// small buffer first), a larger one one part.
	h := sha256.New()
	small := make([]byte, min(smallBytes, a.cfg.PartBytes))
	n, err := io.ReadFull(r, small)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return a.putOne(ctx, sha, small[:n], h)
	}
	if err != nil {
		return fmt.Errorf("store artifact sha256:%s: read the content: %w", sha[:12], err)
	}
	first := make([]byte, a.cfg.PartBytes)
	copy(first, small)
	m, err := io.ReadFull(r, first[n:])
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return a.putOne(ctx, sha, first[:n+m], h)
	}
	if err != nil {
		return fmt.Errorf("store artifact sha256:%s: read the content: %w", sha[:12], err)
	}
	return a.putParts(ctx, sha, first, r, h)
}

func mismatch(sha string, h hash.Hash) error {
	got := hex.EncodeToString(h.Sum(nil))
	return fmt.Errorf("store artifact sha256:%s: the content hashes to %s", sha[:12], got)
}

func (a *Artifacts) putOpts(sha string) minio.PutObjectOptions {
	return minio.PutObjectOptions{ContentType: "application/octet-stream", UserMetadata: map[string]string{"sha256": sha}}
}

// putOne uploads an artifact that fits in one part, after checking it.
func (a *Artifacts) putOne(ctx context.Context, sha string, b []byte, h hash.Hash) error {
	h.Write(b)
	if hex.EncodeToString(h.Sum(nil)) != sha {
		return mismatch(sha, h)
	}
	sum := md5.Sum(b)
	_, err := a.core.PutObject(ctx, a.cfg.Bucket, a.cfg.Key(sha), bytes.NewReader(b), int64(len(b)),
		base64.StdEncoding.EncodeToString(sum[:]), sha, a.putOpts(sha))
	if err != nil {
		return a.storeErr("store", sha, err)
	}
	return nil
}

// putParts uploads a multipart object whose first full part is first,
// holding the last part back until the whole content hashed to sha.
func (a *Artifacts) putParts(ctx context.Context, sha string, first []byte, r io.Reader, h hash.Hash) (err error) {
	key := a.cfg.Key(sha)
	id, err := a.core.NewMultipartUpload(ctx, a.cfg.Bucket, key, a.putOpts(sha))
	if err != nil {
		return a.storeErr("store", sha, err)
	}
	defer func() {
		if err != nil {
			// Bounded even when ctx is what failed: the upload's parts
			// are dropped (a lifecycle rule catches the rare abort that
			// fails too, docs/operations.md).
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = a.core.AbortMultipartUpload(actx, a.cfg.Bucket, key, id)
		}
	}()
	var parts []minio.CompletePart
	send := func(b []byte) error {
		ps := sha256.Sum256(b)
		ms := md5.Sum(b)
		p, err := a.core.PutObjectPart(ctx, a.cfg.Bucket, key, id, len(parts)+1, bytes.NewReader(b), int64(len(b)),
			minio.PutObjectPartOptions{Md5Base64: base64.StdEncoding.EncodeToString(ms[:]), Sha256Hex: hex.EncodeToString(ps[:])})
		if err != nil {
			return a.storeErr("store", sha, err)
		}
		parts = append(parts, minio.CompletePart{PartNumber: p.PartNumber, ETag: p.ETag})
		return nil
	}
	held, next := first, make([]byte, a.cfg.PartBytes)
	h.Write(held)
	// held is the part not sent yet: it is sent once another part was
	// read after it, or, as the last part, once the hash matched.
	for {
		n, rerr := io.ReadFull(r, next)
		if n == 0 && (errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF)) {
			break // held is the last part
		}
		if rerr != nil && !errors.Is(rerr, io.ErrUnexpectedEOF) {
			return fmt.Errorf("store artifact sha256:%s: read the content: %w", sha[:12], rerr)
		}
		if len(parts) >= 10000-1 {
			return fmt.Errorf("store artifact sha256:%s: more than 10,000 parts of %d bytes", sha[:12], a.cfg.PartBytes)
		}
		if err := send(held); err != nil {
			return err
		}
		h.Write(next[:n])
		held, next = next[:n], held[:a.cfg.PartBytes]
		if rerr != nil { // a short read: this was the end
			break
		}
	}
	if hex.EncodeToString(h.Sum(nil)) != sha {
		return mismatch(sha, h)
	}
	if err := send(held); err != nil {
		return err
	}
	if _, err := a.core.CompleteMultipartUpload(ctx, a.cfg.Bucket, key, id, parts, a.putOpts(sha)); err != nil {
		return a.storeErr("store", sha, err)
	}
	return nil
}

// Delete removes the object; a missing one is not an error.
func (a *Artifacts) Delete(ctx context.Context, sha string) error {
	if err := checkSHA(sha); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete artifact sha256:%s: %w", sha[:12], err)
	}
	err := a.core.RemoveObject(ctx, a.cfg.Bucket, a.cfg.Key(sha), minio.RemoveObjectOptions{})
	if err != nil {
		var er minio.ErrorResponse
		if errors.As(err, &er) && er.Code == "NoSuchKey" {
			return nil
		}
		return a.storeErr("delete", sha, err)
	}
	return nil
}
