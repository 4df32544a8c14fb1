package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/records/recordsdb"
)

func getJSON(t *testing.T, u string, v any) result {
	t.Helper()
	r := send(t, "GET", u, "", nil)
	if r.status == 200 {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// TestHistoryPages: history answers in pages of ?limit= (default 100, at
// most 1000), and following nextCursor yields every policy and event
// once, oldest first; a bad limit or cursor is a 400 naming it.
func TestHistoryPages(t *testing.T) {
	ts := newTestServer(t, Config{})
	for i := 0; i < 7; i++ {
		r := send(t, "PUT", ts.URL+"/v1/deployments/churn", fmt.Sprintf(`{"targets":[{"version":1,"weight":100}],"reason":"r%d"}`, i), nil)
		if r.status != 200 {
			t.Fatalf("PUT %d: %d %s", i, r.status, r.body)
		}
	}
	var full api.History
	if r := getJSON(t, ts.URL+"/v1/deployments/churn/history", &full); r.status != 200 || full.NextCursor != "" || len(full.Policies) != 8 {
		t.Fatalf("one page: %d, %d policies, cursor %q", r.status, len(full.Policies), full.NextCursor)
	}
	var pols, evs []string
	cursor, pages := "", 0
	for {
		u := ts.URL + "/v1/deployments/churn/history?limit=3"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		var h api.History
		if r := getJSON(t, u, &h); r.status != 200 {
			t.Fatalf("page %d: %d %s", pages, r.status, r.body)
		}
		if len(h.Policies) > 3 || len(h.Events) > 3 {
			t.Fatalf("page %d: %d policies, %d events, limit 3", pages, len(h.Policies), len(h.Events))
		}
		for _, p := range h.Policies {
			pols = append(pols, p.Reason)
		}
		for _, e := range h.Events {
			evs = append(evs, e.Reason)
		}
		pages++
		if h.NextCursor == "" {
			break
		}
		if pages > 10 {
			t.Fatal("cursors do not end")
		}
		cursor = h.NextCursor
	}
	var want, wantEv []string
	for _, p := range full.Policies {
		want = append(want, p.Reason)
	}
	for _, e := range full.Events {
		wantEv = append(wantEv, e.Reason)
	}
	if fmt.Sprint(pols) != fmt.Sprint(want) || fmt.Sprint(evs) != fmt.Sprint(wantEv) || pages != 3 {
		t.Errorf("%d pages: policies %v, events %v; want %v, %v", pages, pols, evs, want, wantEv)
	}
	for _, q := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"},
		{"cursor=nonsense", "cursor"}, {"cursor=" + encodeCursor("records", 1, 2), "cursor"},
	} {
		if r := send(t, "GET", ts.URL+"/v1/deployments/churn/history?"+q.query, "", nil); r.status != 400 || r.err.Field != q.field {
			t.Errorf("?%s: %d field %q", q.query, r.status, r.err.Field)
		}
	}
}

// TestHistoryOfUnknownModel: GET /v1/deployments/{model}/history of a
// model nobody published is a 404 naming it, as its deployment is — the
// paged path the API and the CLI use, with and without ?at= — while a
// published model's history answers, and a later page of it may be empty.
func TestHistoryOfUnknownModel(t *testing.T) {
	ts := newTestServer(t, Config{})
	for _, q := range []string{"", "?limit=5", "?at=2026-11-30T07:40:00Z"} {
		r := send(t, "GET", ts.URL+"/v1/deployments/nope/history"+q, "", nil)
		if r.status != 404 || r.err.Code != "not_found" || !strings.Contains(r.err.Message, `model "nope" not found`) {
			t.Errorf("history%s of an unknown model: %d %s, want 404 not_found naming it", q, r.status, r.body)
		}
	}
	var h api.History
	if r := getJSON(t, ts.URL+"/v1/deployments/churn/history", &h); r.status != 200 || len(h.Policies) == 0 {
		t.Fatalf("history of churn: %d %s", r.status, r.body)
	}
	last := h.Policies[len(h.Policies)-1].PolicyVersion
	var rest api.History
	u := ts.URL + "/v1/deployments/churn/history?cursor=" + url.QueryEscape(encodeCursor("history", int64(last), 1<<40))
	if r := getJSON(t, u, &rest); r.status != 200 || len(rest.Policies) != 0 || len(rest.Events) != 0 {
		t.Errorf("a page after the last of churn's history: %d %s, want 200 and empty lists", r.status, r.body)
	}
}

// TestRecordsPages: GET /v1/records pages newest first by ?limit= (at most
// 10000) and nextCursor, records created at the same time included.
func TestRecordsPages(t *testing.T) {
	store, err := recordsdb.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	var ops []records.Op
	for i := 0; i < 7; i++ {
		ops = append(ops, records.Op{Row: int64(i + 1), Record: records.Record{RequestID: fmt.Sprint("r", i), Tenant: "default", Model: "churn", Outcome: "ok", CreatedAt: at.Add(time.Duration(i/3) * time.Second), Attempts: 1}})
	}
	if err := store.Write(context.Background(), ops); err != nil {
		t.Fatal(err)
	}
	ts, _ := newTestServerFS(t, Config{RecordStore: store}, examples.FS)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		u := ts.URL + "/v1/records?model=churn&limit=2"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		var rs api.Records
		if r := getJSON(t, u, &rs); r.status != 200 || len(rs.Records) > 2 || pages > 10 {
			t.Fatalf("page %d: %d, %d records", pages, r.status, len(rs.Records))
		}
		for _, r := range rs.Records {
			got = append(got, r.RequestID)
		}
		if rs.NextCursor == "" {
			break
		}
		cursor = rs.NextCursor
	}
	if fmt.Sprint(got) != "[r6 r5 r4 r3 r2 r1 r0]" {
		t.Errorf("pages: %v", got)
	}
	for _, q := range []string{"limit=10001", "cursor=" + encodeCursor("history", 1, 2), "model=" + strings.Repeat("x", 100), "requestId=" + strings.Repeat("x", 200)} {
		if r := send(t, "GET", ts.URL+"/v1/records?"+q, "", nil); r.status != 400 {
			t.Errorf("?%.40s: %d", q, r.status)
		}
	}
}

// TestSlowReaderIsCut: a client that never reads its answer does not
// hold the handler and its connection forever: the answer's write
// deadline (sized for it) passes and the server closes the connection.
func TestSlowReaderIsCut(t *testing.T) {
	grace, rate := writeGrace, writeMinRate
	writeGrace, writeMinRate = time.Millisecond, 1<<40
	t.Cleanup(func() { writeGrace, writeMinRate = grace, rate })
	big := map[string]string{"blob": strings.Repeat("x", 32<<20)} // more than the socket buffers hold
	closed := make(chan struct{}, 1)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, big) }))
	ts.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- struct{}{}
		}
	}
	ts.Start()
	defer ts.Close()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// The answer starts (now stop reading), or on a busy machine the 1 ms
	// deadline passed before its first byte left and the server already
	// closed the connection (EOF): either way the server must close it.
	if _, err := bufio.NewReader(conn).Peek(1); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(time.Minute): // a generous bound on a test that hangs without the fix, not a timing assertion
		t.Fatal("the server still holds the connection of a client that stopped reading")
	}
}
