package tenant

import (
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
)

func TestBucket(t *testing.T) {
	t0 := time.Unix(0, 0)
	ms := time.Millisecond
	b := NewBucket(100, 10, t0) // 100 instances/s, burst 10
	steps := []struct {
		at   time.Duration
		n    float64
		ok   bool
		wait time.Duration
	}{
		{0, 10, true, 0},             // the whole burst
		{0, 1, false, 10 * ms},       // empty: one token takes 10ms
		{5 * ms, 1, false, 5 * ms},   // half a token refilled
		{10 * ms, 1, true, 0},        // one token
		{20 * ms, 5, false, 40 * ms}, // one token there, four more take 40ms
		{1 * time.Second, 10, true, 0},
		{2 * time.Second, 11, false, 0}, // over the burst: never; wait is for a full bucket (already full)
	}
	for i, s := range steps {
		ok, wait := b.Take(s.n, t0.Add(s.at))
		if ok != s.ok || (wait-s.wait).Abs() > time.Microsecond {
			t.Errorf("step %d: Take(%v at %v) = %v, %v; want %v, %v", i, s.n, s.at, ok, wait, s.ok, s.wait)
		}
	}
	b2 := NewBucket(1, 5, t0)
	b2.Take(5, t0)
	b2.Refund(3)
	if ok, _ := b2.Take(3, t0); !ok {
		t.Error("refunded tokens are not usable")
	}
}

const good = `tenants:
  - name: acme
    keys: ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
    models: ["fraud", "iris*"]
    quota: {instancesPerSecond: 200, burst: 400}
  - name: ops
    keys: ["sha256:60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"]
    models: ["*"]
    admin: true
`

func TestParseAndAuthenticate(t *testing.T) {
	s, err := Parse("tenants.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	// sha256("test") is acme's hash above.
	tn, err := s.Authenticate("Bearer test")
	if err != nil || tn.Name != "acme" || tn.Admin {
		t.Fatalf("acme: %v %v", tn, err)
	}
	for _, m := range []string{"fraud", "iris", "iris-v2"} {
		if !tn.Allowed(m) {
			t.Errorf("acme may call %s", m)
		}
	}
	if tn.Allowed("churn") || errs.CodeOf(tn.Check("churn")) != errs.PermissionDenied {
		t.Error("acme may not call churn")
	}
	for _, h := range []string{"", "Bearer ", "Basic dGVzdA==", "Bearer wrong"} {
		if _, err := s.Authenticate(h); errs.CodeOf(err) != errs.Unauthenticated {
			t.Errorf("Authorization %q: %v, want unauthenticated", h, err)
		}
		if err != nil && strings.Contains(err.Error(), "wrong") {
			t.Errorf("error echoes the key: %v", err)
		}
	}
	var none *Set
	if tn, err := none.Authenticate(""); err != nil || tn != Default {
		t.Errorf("open mode: %v %v", tn, err)
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"clear key", `tenants:
  - {name: a, keys: ["sk_live_123"], models: ["*"]}`, `tenants[0].keys[0]: must be "sha256:" and 64 lowercase hex digits`},
		{"unknown key", `tenants:
  - {name: a, keys: ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"], models: ["*"], qouta: {}}`, `tenants[0].qouta: unknown key "qouta"`},
		{"bad quota", `tenants:
  - name: a
    keys: ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]
    models: ["*"]
    quota: {instancesPerSecond: -1}`, `t.yaml:5: tenants[0].quota.instancesPerSecond: must be a number > 0, got -1`},
		{"no models", `tenants:
  - {name: a, keys: ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"]}`, `tenants[0].models: must list the models`},
		{"duplicate hash", `tenants:
  - {name: a, keys: ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"], models: ["*"]}
  - {name: b, keys: ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"], models: ["*"]}`, `already given to tenant "a"`},
		{"bad glob", `tenants:
  - {name: a, keys: ["sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"], models: ["[x"]}`, `tenants[0].models[0]: "[x" is not a valid name or glob`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

func TestNewKey(t *testing.T) {
	k1, h1 := NewKey()
	k2, _ := NewKey()
	if k1 == k2 || !strings.HasPrefix(k1, "sk_") {
		t.Fatalf("keys %q %q", k1, k2)
	}
	s, err := Parse("t.yaml", []byte("tenants:\n  - {name: a, keys: [\""+h1+"\"], models: [\"*\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tn, err := s.Authenticate("Bearer " + k1); err != nil || tn.Name != "a" {
		t.Fatalf("a new key does not authenticate with its printed hash: %v", err)
	}
}

func TestRequestLargerThanBurst(t *testing.T) {
	s, err := Parse("t.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := s.Authenticate("Bearer test")
	err = tn.Take(401, time.Now()) // burst is 400
	if e := errs.As(err); e.Code != errs.TooManyInstances || e.RetryAfter != 0 {
		t.Fatalf("got %v, want too_many_instances without Retry-After: it can never pass", err)
	}
	if err := tn.Take(400, time.Now()); err != nil {
		t.Fatalf("a burst-sized request: %v", err)
	}
}

func TestLookup(t *testing.T) {
	s, err := Parse("t.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := s.Authenticate("Bearer test")
	got, ok := s.Lookup(tn.Name)
	if !ok || got != tn {
		t.Fatalf("Lookup(%q) = %v, %v; want the tenant that authenticates", tn.Name, got, ok)
	}
	if b, ok := got.Burst(); !ok || b != 400 {
		t.Errorf("Burst = %g, %v; want 400", b, ok)
	}
	if _, ok := s.Lookup("nobody"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
	var none *Set
	if d, ok := none.Lookup("default"); !ok || d != Default {
		t.Error("with no tenants file, Lookup(default) is not Default")
	}
	if _, ok := none.Lookup("acme"); ok {
		t.Error("with no tenants file, Lookup(acme) succeeded")
	}
	if _, ok := Default.Burst(); ok {
		t.Error("Default has a quota")
	}
}
