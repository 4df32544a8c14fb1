package cluster

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/workerpb"
)

func TestForgettable(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	cases := []struct {
		name        string
		live, known bool
		silent      time.Duration
		want        bool
	}{
		{"live", true, false, time.Hour, false},
		{"known", false, true, time.Hour, false},
		{"down a while", false, false, 30 * time.Second, false},
		{"down longer than after", false, false, 61 * time.Second, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Forgettable(c.live, c.known, now, now.Add(-c.silent), time.Time{}, time.Minute); got != c.want {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

// registerAt registers id at a made-up loopback address nobody serves
// (the pool dials lazily: nothing is sent there).
func registerAt(t *testing.T, p *Pool, id string, port int) error {
	t.Helper()
	_, err := p.testRegister(t.Context(), &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: id, Address: fmt.Sprintf("127.0.0.1:%d", port), Pid: int64(port)}})
	return err
}

// Registrations beyond --max-workers are refused (too_many_workers,
// retryable, naming the flag) without a goroutine or a connection each;
// Known ids are admitted still.
func TestMaxWorkers(t *testing.T) {
	p := newTestPool(Config{Known: []string{"local"}, MaxWorkers: 3, HeartbeatInterval: time.Hour})
	t.Cleanup(p.Close)
	for i := range 3 {
		if err := registerAt(t, p, fmt.Sprintf("w%d", i), 40000+i); err != nil {
			t.Fatal(err)
		}
	}
	before := runtime.NumGoroutine()
	for i := range 1000 {
		err := registerAt(t, p, fmt.Sprintf("x%d", i), 41000+i)
		if e := errs.As(err); err == nil || codeOf(err) != errs.TooManyWorkers || !strings.Contains(err.Error(), "--max-workers") {
			t.Fatalf("registration past the cap: %v (%+v)", err, e)
		}
	}
	if after := runtime.NumGoroutine(); after > before+10 {
		t.Errorf("goroutines %d → %d after 1,000 refused registrations", before, after)
	}
	p.mu.Lock()
	n := len(p.workers)
	p.mu.Unlock()
	if n != 3 {
		t.Errorf("%d workers registered, want 3", n)
	}
	if err := registerAt(t, p, "local", 42000); err != nil {
		t.Errorf("a known worker past the cap: %v", err)
	}
	if err := registerAt(t, p, "w1", 40001); err != nil {
		t.Errorf("a registered id registering again: %v", err)
	}
}

// The watch loop forgets an attached worker silent for ForgetAfter: out
// of the registry and of the shards, its series deleted; a known one
// stays.
func TestSilentWorkersForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &countingMetrics{}
		p := newTestPool(Config{Known: []string{"local"}, HeartbeatInterval: 100 * time.Millisecond, ForgetAfter: time.Minute, Metrics: m})
		defer p.Close()
		for i, id := range []string{"local", "gone"} {
			if err := registerAt(t, p, id, 40000+i); err != nil {
				t.Fatal(err)
			}
		}
		p.mu.Lock()
		ids := p.idsLocked()
		p.mu.Unlock()
		if !slices.Equal(ids, []string{"gone", "local"}) {
			t.Fatalf("ids %v", ids)
		}
		time.Sleep(30 * time.Second) // out of routing, not yet forgotten
		synctest.Wait()
		if ws := p.Workers(); len(ws) != 2 || ws[0].State != "down" {
			t.Fatalf("after 30 s: %+v", ws)
		}
		time.Sleep(31 * time.Second)
		synctest.Wait()
		ws := p.Workers()
		if len(ws) != 1 || ws[0].ID != "local" {
			t.Fatalf("after 61 s of silence: %+v, want only the known worker", ws)
		}
		p.mu.Lock()
		ids = p.idsLocked()
		p.mu.Unlock()
		if !slices.Equal(ids, []string{"local"}) {
			t.Errorf("shard ids %v, want [local]", ids)
		}
		m.mu.Lock()
		if !slices.Equal(m.forgotten, []string{"gone"}) {
			t.Errorf("series forgotten: %v", m.forgotten)
		}
		m.mu.Unlock()
	})
}

func TestAllowedAddr(t *testing.T) {
	ten, _ := ParseCIDRs("10.0.0.0/8, 192.168.1.5")
	cases := []struct {
		name, addr string
		allow      func(string, netip.Addr) error
		dial       string // "" refused
	}{
		{"loopback", "127.0.0.1:7000", nil, "127.0.0.1:7000"},
		{"loopback v6", "[::1]:7000", nil, "[::1]:7000"},
		{"name resolving to loopback", "localhost:7000", nil, "127.0.0.1:7000|[::1]:7000"},
		{"other IP, default policy", "10.1.2.3:7000", nil, ""},
		{"metadata address", "169.254.169.254:80", nil, ""},
		{"no port", "127.0.0.1", nil, ""},
		{"port 0", "127.0.0.1:0", nil, ""},
		{"port too big", "127.0.0.1:70000", nil, ""},
		{"inside the CIDRs", "10.1.2.3:7000", AllowCIDRs(ten), "10.1.2.3:7000"},
		{"a single IP of the list", "192.168.1.5:1", AllowCIDRs(ten), "192.168.1.5:1"},
		{"outside the CIDRs", "192.168.1.6:1", AllowCIDRs(ten), ""},
		{"mapped v4 is v4", "[::ffff:10.0.0.1]:1", AllowCIDRs(ten), "10.0.0.1:1"},
		{"unresolvable", "no-such-host.invalid:1", AllowCIDRs(ten), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &Pool{cfg: Config{AllowAddr: c.allow}}
			got, err := p.allowedAddr(t.Context(), "w", c.addr)
			if c.dial == "" {
				if err == nil || errs.CodeOf(err) != errs.WorkerAddressRefused {
					t.Fatalf("%s allowed (%q, %v), want worker_address_refused", c.addr, got, err)
				}
				return
			}
			if err != nil || !slices.Contains(strings.Split(c.dial, "|"), got) {
				t.Fatalf("got %q %v, want %q", got, err, c.dial)
			}
		})
	}
	if _, err := (&Pool{}).allowedAddr(t.Context(), "w", "10.1.2.3:1"); err == nil || !strings.Contains(err.Error(), "--worker-cidrs") {
		t.Errorf("the refusal does not name --worker-cidrs: %v", err)
	}
}

func TestParseCIDRs(t *testing.T) {
	cases := []struct {
		in, want string // want "" : an error
	}{
		{"127.0.0.0/8,::1/128", "127.0.0.0/8 ::1/128"},
		{" 10.0.0.1 , 10.2.0.0/16", "10.0.0.1/32 10.2.0.0/16"},
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"", ""},
		{"10.0.0.0/33", ""},
		{"example.com", ""},
	}
	for _, c := range cases {
		got, err := ParseCIDRs(c.in)
		if c.want == "" {
			if err == nil || !strings.Contains(err.Error(), "--worker-cidrs") {
				t.Errorf("%q: %v %v, want an error naming --worker-cidrs", c.in, got, err)
			}
			continue
		}
		s := make([]string, len(got))
		for i, p := range got {
			s[i] = p.String()
		}
		if err != nil || strings.Join(s, " ") != c.want {
			t.Errorf("%q: %v %v, want %s", c.in, s, err, c.want)
		}
	}
}

// Register refuses an address outside the policy before it dials.
func TestRegisterRefusesAddress(t *testing.T) {
	p := newTestPool(Config{HeartbeatInterval: time.Hour})
	t.Cleanup(p.Close)
	_, err := p.testRegister(t.Context(), &workerpb.RegisterRequest{Status: &workerpb.WorkerStatus{Id: "w", Address: "169.254.169.254:80", Pid: 1}})
	if codeOf(err) != errs.WorkerAddressRefused {
		t.Fatalf("got %v, want worker_address_refused", err)
	}
	if len(p.Workers()) != 0 {
		t.Error("a refused worker was registered")
	}
}
