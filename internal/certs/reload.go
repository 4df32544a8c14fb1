package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// CheckEvery is how often, at most, a handshake stats the files of a
// Reloader or a CAPool to see whether they changed.
const CheckEvery = time.Second

// stamp is what a file looked like when it was last read: a change of
// any part (another inode after a rename, a Kubernetes Secret's symlink
// swap, a new mtime or size) means read it again.
type stamp struct {
	info os.FileInfo
}

func (s stamp) same(info os.FileInfo) bool {
	return s.info != nil && os.SameFile(s.info, info) &&
		s.info.ModTime().Equal(info.ModTime()) && s.info.Size() == info.Size()
}

// source is a value read from files and read again when they change,
// checked at most once per interval, on use. A new value that fails to
// load keeps the old one and is reported once (not once per check) until
// the files change again.
type source[T any] struct {
	what     string // "certificate" or "CA file", for logs
	files    []string
	load     func() (*T, error)
	log      *slog.Logger
	interval time.Duration

	cur     atomic.Pointer[T]
	checked atomic.Int64 // unix nanos of the last stat

	mu      sync.Mutex // guards stamps, loadErr, statErr, logged; held by the one checker
	stamps  []stamp    // of the last load attempt, good or bad
	loadErr error      // of the last load attempt; nil when it loaded
	statErr error      // of the last check, when a file could not be stat'ed
	logged  string     // the error logged last, so it is logged once
}

func newSource[T any](what string, files []string, load func() (*T, error), log *slog.Logger) (*source[T], error) {
	if log == nil {
		log = slog.Default()
	}
	s := &source[T]{what: what, files: files, load: load, log: log, interval: CheckEvery, stamps: make([]stamp, len(files))}
	infos, err := s.stat()
	if err != nil {
		return nil, err
	}
	v, err := load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(v)
	s.remember(infos)
	s.checked.Store(time.Now().UnixNano())
	return s, nil
}

func (s *source[T]) stat() ([]os.FileInfo, error) {
	infos := make([]os.FileInfo, len(s.files))
	for i, f := range s.files {
		info, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("certs: %s: %w (give the path of a readable PEM file)", f, err)
		}
		infos[i] = info
	}
	return infos, nil
}

func (s *source[T]) remember(infos []os.FileInfo) {
	for i, info := range infos {
		s.stamps[i] = stamp{info: info}
	}
}

// get returns the current value, reading the files again first when the
// interval has passed and they changed. Only one caller checks at a time;
// the others go on with the current value.
func (s *source[T]) get() *T {
	now := time.Now().UnixNano()
	if now-s.checked.Load() < int64(s.interval) || !s.mu.TryLock() {
		return s.cur.Load()
	}
	defer s.mu.Unlock()
	s.checked.Store(now)
	infos, err := s.stat()
	s.statErr = err
	if err != nil {
		s.reportLocked(err)
		return s.cur.Load()
	}
	changed := false
	for i, info := range infos {
		if !s.stamps[i].same(info) {
			changed = true
		}
	}
	if !changed {
		return s.cur.Load()
	}
	s.remember(infos)
	v, err := s.load()
	s.loadErr = err
	if err != nil {
		s.reportLocked(err)
		return s.cur.Load()
	}
	s.logged = ""
	s.cur.Store(v)
	s.log.Info("tls: reloaded "+s.what, "files", s.files)
	return v
}

// reportLocked logs err unless it is the one logged last.
func (s *source[T]) reportLocked(err error) {
	if msg := err.Error(); msg != s.logged {
		s.log.Error("tls: reload "+s.what+" failed; keeping the previous one", "files", s.files, "err", err)
		s.logged = msg
	}
}

// err is why the files in force are not the ones on disk: a file that
// could not be stat'ed at the last check, else the last load that failed;
// nil when what is on disk is in force.
func (s *source[T]) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statErr != nil {
		return s.statErr
	}
	return s.loadErr
}

// Reloader is a certificate and its key read from two PEM files and read
// again when either changes (checked at most once per CheckEvery, on a
// handshake). A new pair that fails to load (unreadable, not PEM, a key
// that does not match) keeps the previous certificate, and the error is
// logged once. Connections already open are never touched: only new
// handshakes see a new certificate.
type Reloader struct {
	src *source[tls.Certificate]
}

// NewReloader reads certFile and keyFile. An error here names the file and
// what to do about it.
func NewReloader(certFile, keyFile string, log *slog.Logger) (*Reloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("certs: a certificate needs both a certificate file and a key file")
	}
	src, err := newSource("certificate", []string{certFile, keyFile}, func() (*tls.Certificate, error) {
		return loadPair(certFile, keyFile)
	}, log)
	if err != nil {
		return nil, err
	}
	return &Reloader{src: src}, nil
}

func loadPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("certs: read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: read key: %w", err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certs: certificate %s with key %s: %w (both PEM: the certificate chain, leaf first, and its unencrypted private key)", certFile, keyFile, err)
	}
	return &c, nil
}

// Certificate is the current certificate, after a check for new files.
func (r *Reloader) Certificate() *tls.Certificate { return r.src.get() }

// GetCertificate is tls.Config.GetCertificate for a server.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.src.get(), nil
}

// GetClientCertificate is tls.Config.GetClientCertificate for a client.
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.src.get(), nil
}

// Err is the error of the last reload, nil when the files loaded (or have
// not changed since they last did).
func (r *Reloader) Err() error { return r.src.err() }

// CAPool is a pool of CA certificates read from one PEM file and read
// again when it changes (checked at most once per CheckEvery, on use); a
// new file that fails to load keeps the previous pool.
type CAPool struct {
	src *source[x509.CertPool]
}

// NewCAPool reads file, a PEM file of one or more CA certificates.
func NewCAPool(file string, log *slog.Logger) (*CAPool, error) {
	if file == "" {
		return nil, errors.New("certs: a CA pool needs a file")
	}
	src, err := newSource("CA file", []string{file}, func() (*x509.CertPool, error) {
		return loadPool(file)
	}, log)
	if err != nil {
		return nil, err
	}
	return &CAPool{src: src}, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("certs: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("certs: CA file %s holds no PEM certificate (want one or more -----BEGIN CERTIFICATE----- blocks)", file)
	}
	return pool, nil
}

// Pool is the current pool, after a check for a new file.
func (p *CAPool) Pool() *x509.CertPool { return p.src.get() }

// Err is the error of the last reload, nil when the file loaded.
func (p *CAPool) Err() error { return p.src.err() }
