package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/sluiceml/sluice/internal/tenant"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestTenants(t *testing.T) {
	// Hashes of the keys "acme-secret-key" and "ops-secret-key".
	acme, opsKey := "acme-secret-key", "ops-secret-key"
	hash := sha256hex
	file := `tenants:
  - name: acme
    keys: ["sha256:` + hash(acme) + `"]
    models: ["fraud", "iris*"]
    quota: {instancesPerSecond: 0.001, burst: 3}
  - name: ops
    keys: ["sha256:` + hash(opsKey) + `"]
    models: ["*"]
    admin: true
`
	set, err := tenant.Parse("tenants.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	ts := newTestServer(t, Config{Tenants: set, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	fraud := `{"instances":[{"amount":1,"accountAgeDays":1}]}`
	two := `{"instances":[{"amount":1,"accountAgeDays":1},{"amount":2,"accountAgeDays":2}]}`
	churn := `{"instances":[{"tenureMonths":3,"supportTickets":4,"plan":"basic"}]}`
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	cases := []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		code             string
	}{
		{"no key", "fraud:predict", fraud, nil, 401, "unauthenticated"},
		{"wrong key", "fraud:predict", fraud, bearer("acme-secret-kez"), 401, "unauthenticated"},
		{"not bearer", "fraud:predict", fraud, map[string]string{"Authorization": "Basic " + acme}, 401, "unauthenticated"},
		{"model not allowed", "churn:predict", churn, bearer(acme), 403, "permission_denied"},
		{"unknown model not allowed either", "nope:predict", fraud, bearer(acme), 403, "permission_denied"},
		{"allowed", "fraud:predict", fraud, bearer(acme), 200, ""},
		{"allowed, burst now 1 left", "fraud:predict", fraud, bearer(acme), 200, ""},
		{"over quota (2 instances, 1 token)", "fraud:predict", two, bearer(acme), 429, "quota_exceeded"},
		{"invalid request costs no quota", "fraud:predict", `{"instances":[{"amount":-1,"accountAgeDays":1}]}`, bearer(acme), 400, "invalid_argument"},
		{"last token", "fraud:predict", fraud, bearer(acme), 200, ""},
		{"quota spent", "fraud:predict", fraud, bearer(acme), 429, "quota_exceeded"},
		{"other tenant unaffected", "churn:predict", churn, bearer(opsKey), 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, ts.URL+"/v1/models/"+c.path, "application/json", c.body, c.hdr)
			if r.status != c.status || r.err.Code != c.code {
				t.Fatalf("got %d %s (%s), want %d %s", r.status, r.err.Code, r.err.Message, c.status, c.code)
			}
			if c.status == 429 && r.header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			if strings.Contains(string(r.body), "secret") {
				t.Errorf("response echoes a key: %s", r.body)
			}
		})
	}
	// Publishing needs an admin tenant.
	r := post(t, ts.URL+"/v1/models/fraud/versions", "application/gzip", "x", bearer(acme))
	if r.status != 403 {
		t.Errorf("non-admin upload: %d", r.status)
	}
	r = post(t, ts.URL+"/v1/models/fraud/versions", "application/gzip", "x", bearer(opsKey))
	if r.status != 422 || r.err.Code != "invalid_package" {
		t.Errorf("admin upload of garbage: %d %s", r.status, r.err.Code)
	}
	if l := logs.String(); strings.Contains(l, "secret") {
		t.Errorf("a key reached the logs:\n%s", l)
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
