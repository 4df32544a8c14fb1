package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/api"
)

// TestHugeLiteralIsNotKept: a 400 for a 1 MB number literal quotes at most
// errs.MaxQuote characters of it, and the idempotency cache keeps nothing
// for it (it never reached a model): 50 such requests with distinct ids
// leave the cache empty, and a retry computes the same small answer.
func TestHugeLiteralIsNotKept(t *testing.T) {
	ts, _, s := newTestServerAll(t, Config{MaxBodyBytes: 2 << 20}, examples.FS)
	huge := strings.Repeat("9", 1<<20)
	body := `{"instances":[{"tenureMonths":` + huge + `,"supportTickets":4,"plan":"basic"}]}`
	for i := 0; i < 50; i++ {
		r := post(t, ts.URL+"/v1/models/churn:predict", "application/json", body, map[string]string{"X-Request-Id": fmt.Sprint("huge-", i)})
		if r.status != 400 || r.err.Field != "instances[0].tenureMonths" || r.header.Get("Idempotent-Replay") != "" {
			t.Fatalf("request %d: %d %+v", i, r.status, r.err)
		}
		if len(r.body) > 512 || !strings.Contains(r.err.Message, strings.Repeat("9", 64)+"…") {
			t.Fatalf("request %d: a %d-byte error body: %.300s", i, len(r.body), r.body)
		}
	}
	if n := s.gw.Idem.Len(); n != 0 {
		t.Fatalf("the idempotency cache holds %d ids (%d bytes) after validation errors only", n, s.gw.Idem.Bytes())
	}
	r := post(t, ts.URL+"/v1/models/churn:predict", "application/json", body, map[string]string{"X-Request-Id": "huge-0"})
	if r.status != 400 || r.header.Get("Idempotent-Replay") != "" {
		t.Fatalf("retry: %d replay=%q", r.status, r.header.Get("Idempotent-Replay"))
	}
}

func send(t *testing.T, method, url, body string, hdr map[string]string) result {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := result{status: resp.StatusCode, header: resp.Header, body: b}
	if resp.StatusCode >= 300 {
		var eb api.ErrorBody
		if err := json.Unmarshal(b, &eb); err != nil {
			t.Fatalf("error body is not JSON: %q", b)
		}
		r.err = eb.Error
	}
	return r
}

// TestControlBodiesAreBounded: control bodies are decoded strictly
// (duplicate keys at any depth, unknown keys, trailing data, wrong types:
// 400 naming the field, quoting little of the input), free text and names
// are bounded, and a negative rollback target is a 400, not a 404.
func TestControlBodiesAreBounded(t *testing.T) {
	ts := newTestServer(t, Config{})
	huge := strings.Repeat("9", 100000)
	long := strings.Repeat("é", maxReason+1)
	cases := []struct {
		name, method, path, body string
		status                   int
		field, msg               string
	}{
		{"duplicate key", "PUT", "churn", `{"targets":[{"version":1,"weight":100}],"reason":"a","reason":"b"}`, 400, "reason", "duplicate key"},
		{"nested duplicate key", "PUT", "churn", `{"targets":[{"version":1,"version":2,"weight":100}]}`, 400, "targets[0].version", "duplicate key"},
		{"unknown key", "PUT", "churn", `{"targets":[],"foo":1}`, 400, "foo", "unknown key"},
		{"nested unknown key", "PUT", "churn", `{"targets":[{"version":1,"weihgt":100}]}`, 400, "targets[0].weihgt", "unknown key"},
		{"trailing data", "PUT", "churn", `{"targets":[]} {}`, 400, "", "data after the object"},
		{"not an object", "PUT", "churn", `[1]`, 400, "", "must be a JSON object"},
		{"reason too long", "PUT", "churn", `{"targets":[{"version":1,"weight":100}],"reason":"` + long + `"}`, 400, "reason", "at most 1024 characters, got 1025"},
		{"rollback to negative", "POST", "churn:rollback", `{"to":-5}`, 400, "to", "must be a version number"},
		{"rollback to a string", "POST", "churn:rollback", `{"to":"2"}`, 400, "to", "expected an integer, got a string"},
		{"rollback to a huge number", "POST", "churn:rollback", `{"to":` + huge + `}`, 400, "to", strings.Repeat("9", 64) + "…"},
		{"rollback reason too long", "POST", "churn:rollback", `{"reason":"` + long + `"}`, 400, "reason", "at most 1024"},
		{"action with a version", "POST", "churn/rollout:pause", `{"to":2}`, 400, "to", "only a rollback"},
		{"action reason too long", "POST", "churn/rollout:pause", `{"reason":"` + long + `"}`, 400, "reason", "at most 1024"},
		{"rollout reason too long", "POST", "churn/rollout", `{"version":1,"reason":"` + long + `"}`, 400, "reason", "at most 1024"},
		{"plan unknown key", "POST", "churn/rollout", `{"version":1,"plan":{"stepz":[10]}}`, 400, "plan.stepz", "unknown key"},
		{"plan duplicate key", "POST", "churn/rollout", `{"version":1,"plan":{"steps":[10],"steps":[20]}}`, 400, "plan.steps", "duplicate key"},
		{"model name too long", "GET", strings.Repeat("a", 64), ``, 400, "model", "at most 63 characters"},
		{"model name not a name", "POST", "Churn:rollback", `{}`, 400, "model", "is not a model name"},
		{"huge model name", "GET", strings.Repeat("A", 10000) + "/history", ``, 400, "model", "…"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := send(t, c.method, ts.URL+"/v1/deployments/"+c.path, c.body, nil)
			if r.status != c.status || r.err.Field != c.field || !strings.Contains(r.err.Message, c.msg) {
				t.Fatalf("got %d field %q: %s; want %d field %q: …%s…", r.status, r.err.Field, r.err.Message, c.status, c.field, c.msg)
			}
			if len(r.body) > 1024 {
				t.Errorf("a %d-byte error body", len(r.body))
			}
		})
	}
}

// TestPredictOptionBounds: deadlineMs below 1µs is a 400 (it would round
// to no deadline, then to the default); routing keys are counted in
// characters, as documented.
func TestPredictOptionBounds(t *testing.T) {
	ts := newTestServer(t, Config{})
	inst := `{"instances":[{"tenureMonths":3,"supportTickets":4,"plan":"basic"}]`
	key := func(n int) string { return strings.Repeat("é", n) }
	for _, c := range []struct {
		name, body string
		hdr        map[string]string
		status     int
		field      string
	}{
		{"deadline below 1µs", inst + `,"deadlineMs":0.0001}`, nil, 400, "deadlineMs"},
		{"deadline 1µs", inst + `,"deadlineMs":0.001}`, nil, 504, ""},
		{"routingKey of 256 characters", inst + `,"routingKey":"` + key(256) + `"}`, nil, 200, ""},
		{"routingKey of 257 characters", inst + `,"routingKey":"` + key(257) + `"}`, nil, 400, "routingKey"},
		{"X-Routing-Key of 256 characters", inst + `}`, map[string]string{"X-Routing-Key": key(256)}, 200, ""},
		{"X-Routing-Key of 257 characters", inst + `}`, map[string]string{"X-Routing-Key": key(257)}, 400, "X-Routing-Key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := send(t, "POST", ts.URL+"/v1/models/churn:predict", c.body, c.hdr)
			if r.status != c.status || r.err.Field != c.field {
				t.Fatalf("got %d field %q (%s), want %d field %q", r.status, r.err.Field, r.err.Message, c.status, c.field)
			}
		})
	}
}
