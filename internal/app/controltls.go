package app

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluiceml/sluice/internal/certs"
	"github.com/sluiceml/sluice/internal/cluster"
)

// The control plane's credentials (docs/operations.md, "Securing
// workers"): its listener always speaks TLS, with --control-tls-cert and
// --control-tls-key, else a self-signed certificate made once in
// <--data>/control (ca.pem, the certificate workers are given as --ca;
// key.pem, 0600) and reused; workers join with the token of
// --join-token-file (default <--data>/control/join-token, made 0600 if
// missing), or a client certificate --worker-client-ca signs.

// controlCreds are what the pool and the control plane's listener use.
type controlCreds struct {
	tls       *tls.Config // the listener's
	caFile    string      // what workers verify the listener with (--ca)
	tokenFile string      // the join token's file ("" with none)
	join      cluster.JoinAuth
}

// selfSignedFor is how long the control plane's own certificate is valid.
const selfSignedFor = 10 * 365 * 24 * time.Hour

// loadControlCreds reads or makes the control plane's certificate and
// join token.
func loadControlCreds(c Config, log *slog.Logger) (*controlCreds, error) {
	dir := filepath.Join(c.Data, "control")
	cc := &controlCreds{}
	certFile, keyFile := c.ControlTLSCert, c.ControlTLSKey
	switch {
	case certFile != "" && keyFile != "":
		cc.caFile = certFile // local workers trust the certificate itself as their root
	case certFile != "" || keyFile != "":
		return nil, errors.New("--control-tls-cert and --control-tls-key go together: give both, or neither for a self-signed certificate in <--data>/control")
	default:
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("control plane certificate: %w", err)
		}
		certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "key.pem")
		if err := ensureSelfSigned(certFile, keyFile, controlHosts(c), log); err != nil {
			return nil, err
		}
		cc.caFile = certFile
	}
	cfg, err := certs.ServerConfig(certFile, keyFile, "", log)
	if err != nil {
		return nil, fmt.Errorf("--control-tls-cert/--control-tls-key: %w", err)
	}
	if c.WorkerClientCA != "" {
		pool, err := certs.NewCAPool(c.WorkerClientCA, log)
		if err != nil {
			return nil, fmt.Errorf("--worker-client-ca: %w", err)
		}
		// A client certificate is checked when given; a worker without one
		// joins with the token instead.
		cfg = certs.VerifyClients(cfg, pool, tls.VerifyClientCertIfGiven)
		cc.join.ClientCAs = pool.Pool
	}
	cc.tls = cfg

	cc.tokenFile = c.JoinTokenFile
	if cc.tokenFile == "" {
		cc.tokenFile = filepath.Join(dir, "join-token")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("join token: %w", err)
		}
		if err := ensureToken(cc.tokenFile); err != nil {
			return nil, err
		}
	}
	tf := &tokenFile{path: cc.tokenFile, log: log}
	if err := tf.loadLocked(); err != nil { // not shared yet
		return nil, fmt.Errorf("--join-token-file %s: %w", cc.tokenFile, err)
	}
	cc.join.Token = tf.Token
	WarnTokenMode(log, "--join-token-file", cc.tokenFile)
	return cc, nil
}

// WarnTokenMode warns when the join token's file may be read by others
// than its owner (mode & 077): anyone who reads it can register a worker
// and be sent a model's traffic. (sluice serve and sluice worker, at
// start.)
func WarnTokenMode(log *slog.Logger, flag, file string) {
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	log.Warn("the join token's file is readable by other users: anyone who reads it can join a worker and be sent a model's traffic; run chmod 600 on it",
		"file", file, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()), "flag", flag, "fix", "chmod 600 "+file)
}

// controlHosts are the names the self-signed certificate is valid for.
func controlHosts(c Config) []string {
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if host, _, err := net.SplitHostPort(c.ControlAddr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, host)
		}
	}
	return append(hosts, c.ControlTLSHosts...)
}

// ensureSelfSigned keeps the certificate in certFile and keyFile when it
// is valid for hosts for another 30 days, else makes a new one (a new
// CA: workers elsewhere need the new file).
func ensureSelfSigned(certFile, keyFile string, hosts []string, log *slog.Logger) error {
	if certPEM, err := os.ReadFile(certFile); err == nil {
		if _, kerr := os.Stat(keyFile); kerr == nil {
			why := coverage(certPEM, hosts)
			if why == "" {
				return nil
			}
			log.Warn("control plane certificate made again: copy the new one to the workers' --ca", "ca", certFile, "reason", why)
		}
	}
	certPEM, keyPEM, err := certs.SelfSigned(hosts, selfSignedFor)
	if err != nil {
		return fmt.Errorf("control plane certificate: %w", err)
	}
	if err := writeFile(keyFile, keyPEM, 0o600); err != nil {
		return fmt.Errorf("control plane key: %w", err)
	}
	if err := writeFile(certFile, certPEM, 0o644); err != nil {
		return fmt.Errorf("control plane certificate: %w", err)
	}
	log.Info("control plane certificate made", "ca", certFile, "hosts", hosts)
	return nil
}

// coverage says why certPEM will not do for hosts ("" when it does).
func coverage(certPEM []byte, hosts []string) string {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return "no PEM certificate in the file"
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return err.Error()
	}
	if time.Until(cert.NotAfter) < 30*24*time.Hour {
		return "it expires on " + cert.NotAfter.Format(time.DateOnly)
	}
	for _, h := range hosts {
		if err := cert.VerifyHostname(h); err != nil {
			return "not valid for " + h
		}
	}
	return ""
}

// ensureToken makes a join token in file (32 random bytes, hex, 0600)
// unless the file exists.
func ensureToken(file string) error {
	if _, err := os.Stat(file); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("join token: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("join token: %w", err)
	}
	return writeFile(file, []byte(hex.EncodeToString(b[:])+"\n"), 0o600)
}

// writeFile writes b to file with perm through a temporary file and a
// rename: a reader sees the old file or the new one.
func writeFile(file string, b []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), ".tmp-"+filepath.Base(file)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// tokenFile is the join token, read again when its file changes (checked
// at most once a second): a token is rotated without a restart. A file
// that becomes unreadable or empty keeps the last good token and is
// logged.
type tokenFile struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	checked time.Time
	mod     time.Time
	size    int64
	token   []byte
}

// Token is the current token (cluster.JoinAuth.Token).
func (t *tokenFile) Token() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.checked) >= time.Second {
		if err := t.loadLocked(); err != nil {
			t.log.Error("join token file not read again: the last token stays", "join_token_file", t.path, "err", err)
		}
	}
	return t.token
}

// loadLocked reads the file when it changed since the last read.
func (t *tokenFile) loadLocked() error {
	t.checked = time.Now()
	info, err := os.Stat(t.path)
	if err != nil {
		return err
	}
	if t.token != nil && info.ModTime().Equal(t.mod) && info.Size() == t.size {
		return nil
	}
	b, err := ReadToken(t.path)
	if err != nil {
		return err
	}
	t.token, t.mod, t.size = b, info.ModTime(), info.Size()
	return nil
}

// ReadToken reads a join token file: its content without surrounding
// white space, at least 16 bytes, at most 4 KiB.
func ReadToken(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4<<10+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	if len(b) > 4<<10 {
		return nil, fmt.Errorf("%s: more than 4 KiB: a join token is one line", file)
	}
	tok := bytes.TrimSpace(b)
	if len(tok) < 16 {
		return nil, fmt.Errorf("%s: a join token of at least 16 characters is required (sluice serve makes one of 64 in <--data>/control/join-token)", file)
	}
	return tok, nil
}
