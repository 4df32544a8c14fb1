package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/examples"
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
