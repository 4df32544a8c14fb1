package redisfeat

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/features"
	"github.com/sluiceml/sluice/internal/features/featuretest"
)

// redisServer starts Debian's redis-server on a free 127.0.0.1 port for
// the test (skipped without one unless SLUICE_TEST_REDIS_REQUIRED is set:
// make test-features sets it) and returns its URL and process.
func redisServer(t *testing.T) (string, *os.Process) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("SLUICE_TEST_REDIS_REQUIRED") != "" {
			t.Fatal("redis-server is not on PATH but SLUICE_TEST_REDIS_REQUIRED is set (scripts/start-redis.sh installs it)")
		}
		t.Skip("needs redis-server (scripts/start-redis.sh installs it; make test-features runs these tests)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatalf("redis-server does not listen on %d", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Sprintf("redis://127.0.0.1:%d/0", port), cmd.Process
}

func TestConformance(t *testing.T) {
	featuretest.Run(t, func(t *testing.T) featuretest.Store {
		url, proc := redisServer(t)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		s, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		if err := s.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		return featuretest.Store{
			Source: s,
			Put: func(ctx context.Context, v *features.View, entity string, values []*float64, at time.Time) error {
				c := s.get()
				fv := c.B().Hset().Key(Key(v.Name, entity)).FieldValue()
				for k, f := range v.Fields {
					if values[k] != nil {
						fv = fv.FieldValue(f, features.FormatValue(*values[k]))
					}
				}
				if !at.IsZero() {
					fv = fv.FieldValue(TSField, strconv.FormatInt(at.Unix(), 10))
				}
				return c.Do(ctx, fv.Build()).Error()
			},
			Stall: func(t *testing.T) func() {
				proc.Signal(syscall.SIGSTOP)
				return func() { proc.Signal(syscall.SIGCONT) }
			},
		}
	})
}

func TestBadURL(t *testing.T) {
	_, err := Open(t.Context(), "http://x")
	if err == nil || !strings.Contains(err.Error(), "--features-redis") {
		t.Errorf("err %v", err)
	}
}

// A server that is down at Open is reached by a later Ping.
func TestConnectLater(t *testing.T) {
	url, proc := redisServer(t)
	proc.Signal(syscall.SIGSTOP)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	s, err := Open(ctx, url)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	proc.Signal(syscall.SIGCONT)
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping after the server woke: %v", err)
	}
}
