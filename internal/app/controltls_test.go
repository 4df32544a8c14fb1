package app

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The self-signed certificate and the token are made once and kept; a
// certificate that lacks a host asked for is made again; a given token
// file must exist; a short one is refused naming the file.
func TestControlCreds(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	data := t.TempDir()
	c := Config{Data: data, ControlAddr: "127.0.0.1:0"}
	cc, err := loadControlCreds(c, log)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(data, "control")
	if cc.caFile != filepath.Join(dir, "ca.pem") || cc.tokenFile != filepath.Join(dir, "join-token") {
		t.Fatalf("files %q %q", cc.caFile, cc.tokenFile)
	}
	for f, perm := range map[string]os.FileMode{"key.pem": 0o600, "join-token": 0o600, "ca.pem": 0o644} {
		info, err := os.Stat(filepath.Join(dir, f))
		if err != nil || info.Mode().Perm() != perm {
			t.Errorf("%s: %v %v, want %v", f, info.Mode().Perm(), err, perm)
		}
	}
	if tok := cc.join.Token(); len(tok) != 64 {
		t.Errorf("token %q", tok)
	}
	ca1, _ := os.ReadFile(cc.caFile)
	tok1 := cc.join.Token()

	// Kept at the next start.
	cc2, err := loadControlCreds(c, log)
	if err != nil {
		t.Fatal(err)
	}
	ca2, _ := os.ReadFile(cc2.caFile)
	if !bytes.Equal(ca1, ca2) || !bytes.Equal(tok1, cc2.join.Token()) {
		t.Error("the certificate or the token changed at a restart")
	}
	// A new name asked for: a new certificate.
	c.ControlTLSHosts = []string{"gw.example.com"}
	if _, err := loadControlCreds(c, log); err != nil {
		t.Fatal(err)
	}
	ca3, _ := os.ReadFile(cc.caFile)
	if bytes.Equal(ca1, ca3) || coverage(ca3, []string{"gw.example.com", "127.0.0.1"}) != "" {
		t.Errorf("not made again for gw.example.com: %s", coverage(ca3, []string{"gw.example.com"}))
	}

	for _, bad := range []struct {
		cfg  Config
		want string
	}{
		{Config{Data: data, JoinTokenFile: filepath.Join(data, "nope")}, "--join-token-file"},
		{Config{Data: data, ControlTLSCert: cc.caFile}, "--control-tls-cert and --control-tls-key go together"},
	} {
		if _, err := loadControlCreds(bad.cfg, log); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want %q", bad.cfg, err, bad.want)
		}
	}
	short := filepath.Join(data, "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadControlCreds(Config{Data: data, JoinTokenFile: short}, log); err == nil || !strings.Contains(err.Error(), "at least 16 characters") {
		t.Errorf("a short token: %v", err)
	}
}

// The token file is read again when it changes (a rotation without a
// restart); a file that becomes empty keeps the last good token.
func TestTokenFileRotates(t *testing.T) {
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte("first-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := &tokenFile{path: f, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := tf.loadLocked(); err != nil {
		t.Fatal(err)
	}
	if got := string(tf.Token()); got != "first-token-0123456789" {
		t.Fatalf("token %q", got)
	}
	write := func(s string, at time.Time) {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f, at, at); err != nil {
			t.Fatal(err)
		}
		tf.mu.Lock()
		tf.checked = time.Time{} // the next Token checks the file (not a second later)
		tf.mu.Unlock()
	}
	write("second-token-0123456789", time.Now().Add(time.Minute))
	if got := string(tf.Token()); got != "second-token-0123456789" {
		t.Fatalf("after the rotation: %q", got)
	}
	write("", time.Now().Add(2*time.Minute))
	if got := string(tf.Token()); got != "second-token-0123456789" {
		t.Fatalf("after the file was emptied: %q", got)
	}
}

// A join token file others may read is warned about, naming the file and
// the fix; one only its owner reads is not.
func TestWarnTokenMode(t *testing.T) {
	file := filepath.Join(t.TempDir(), "join-token")
	if err := os.WriteFile(file, []byte(strings.Repeat("a", 64)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o400, false}, {0o640, true}, {0o604, true}} {
		if err := os.Chmod(file, c.mode); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		WarnTokenMode(slog.New(slog.NewTextHandler(&b, nil)), "--join-token-file", file)
		if got := strings.Contains(b.String(), "chmod 600 "+file); got != c.warn {
			t.Errorf("mode %04o: warned %v, want %v: %q", c.mode, got, c.warn, b.String())
		}
	}
}
