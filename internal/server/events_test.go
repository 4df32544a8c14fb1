package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/events"
)

// sse is one server-sent event as read off a stream.
type sse struct{ id, kind, data string }

// stream is an open GET /v1/events.
type stream struct {
	resp   *http.Response
	events chan sse // closed at the stream's end
}

func openEvents(t *testing.T, url, key, last string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	st := &stream{resp: resp, events: make(chan sse, 100)}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != 200 {
		close(st.events)
		return st
	}
	go func() {
		defer close(st.events)
		sc := bufio.NewScanner(resp.Body)
		var e sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.kind != "" {
					st.events <- e
				}
				e = sse{}
			case strings.HasPrefix(line, "id: "):
				e.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				e.kind = line[7:]
			case strings.HasPrefix(line, "data: "):
				e.data = line[6:]
			}
		}
	}()
	return st
}

// next returns the stream's next event of kind (others skipped), failing
// after 10 s.
func (st *stream) next(t *testing.T, kind string) sse {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-st.events:
			if !ok {
				t.Fatalf("stream ended waiting for a %s event", kind)
			}
			if e.kind == kind {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event within 10 s", kind)
		}
	}
}

func newEventServer(t *testing.T, cfg Config) (string, *control.Controller, *Server, *events.Hub) {
	t.Helper()
	hub := events.New(events.Config{MaxStreams: 3})
	cfg.Events = hub
	ts, ctl, s := newTestServerCtl(t, cfg, control.Config{Changed: func(c control.Change) { PublishChange(hub, c) }}, examples.FS)
	return ts.URL, ctl, s, hub
}

// A traffic change reaches an open stream as a deployment event with its
// weights, actor and reason, and as an audit event; Last-Event-ID
// replays it.
func TestEventsDeployment(t *testing.T) {
	url, _, _, _ := newEventServer(t, Config{})
	st := openEvents(t, url+"/v1/events?models=churn", "", "")
	if ct := st.resp.Header.Get("Content-Type"); st.resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("GET /v1/events: %d %s", st.resp.StatusCode, ct)
	}
	if r := send(t, "PUT", url+"/v1/deployments/churn", `{"targets":[{"version":1,"weight":100}],"reason":"events test"}`, nil); r.status != 200 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	e := st.next(t, "deployment")
	var d api.EventDeployment
	if err := json.Unmarshal([]byte(e.data), &d); err != nil || d.Model != "churn" || d.Reason != "events test" || len(d.Weights) != 1 || d.Weights[0].Weight != 100 || d.Actor == "" {
		t.Errorf("deployment event %s (%v)", e.data, err)
	}
	a := st.next(t, "audit")
	if !strings.Contains(a.data, `"action":"policy"`) || !strings.Contains(a.data, `"model":"churn"`) {
		t.Errorf("audit event %s", a.data)
	}
	// Reconnecting from the deployment event replays the audit one.
	again := openEvents(t, url+"/v1/events?models=churn", "", e.id)
	if r := again.next(t, "audit"); r.id != a.id {
		t.Errorf("replay gave %s, want %s", r.id, a.id)
	}
	// From an id the server never sent: a reset.
	gone := openEvents(t, url+"/v1/events", "", "1")
	if r := gone.next(t, "reset"); !strings.Contains(r.data, "no longer kept") {
		t.Errorf("reset %s", r.data)
	}
}

// A caller sees only the models its key may read; workers only an admin.
func TestEventsTenants(t *testing.T) {
	set, acme, _, root := routeTenants(t)
	url, _, _, hub := newEventServer(t, Config{Tenants: set})
	if st := openEvents(t, url+"/v1/events", "", ""); st.resp.StatusCode != 401 {
		t.Errorf("no key: %d", st.resp.StatusCode)
	}
	if st := openEvents(t, url+"/v1/events?models=churn", acme, ""); st.resp.StatusCode != 403 {
		t.Errorf("acme asking for churn: %d, want 403", st.resp.StatusCode)
	}
	if st := openEvents(t, url+"/v1/events?models=a,,b", acme, ""); st.resp.StatusCode != 400 {
		t.Errorf("a bad name: %d, want 400", st.resp.StatusCode)
	}
	a := openEvents(t, url+"/v1/events", acme, "")
	r := openEvents(t, url+"/v1/events", root, "")
	time.Sleep(100 * time.Millisecond) // (both subscribed: at most 3 streams, so wait on the count)
	for hub.Streams() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	hub.Publish("version", "churn", api.EventVersion{Model: "churn"})
	hub.Publish("worker", "", api.EventWorker{Worker: "w1", State: "ready"})
	hub.Publish("version", "iris", api.EventVersion{Model: "iris"})
	if e := a.next(t, "version"); !strings.Contains(e.data, `"iris"`) {
		t.Errorf("acme got %s first, want iris (churn is not its)", e.data)
	}
	if e := r.next(t, "version"); !strings.Contains(e.data, `"churn"`) {
		t.Errorf("root got %s", e.data)
	}
	if e := r.next(t, "worker"); !strings.Contains(e.data, `"w1"`) {
		t.Errorf("root got %s", e.data)
	}
	// The bound: a third stream is allowed, a fourth is refused.
	openEvents(t, url+"/v1/events", root, "")
	if st := openEvents(t, url+"/v1/events", root, ""); st.resp.StatusCode != 503 || st.resp.Header.Get("Retry-After") == "" {
		t.Errorf("a fourth stream: %d, want 503 with Retry-After", st.resp.StatusCode)
	}
}

// Draining (the listeners' stop) ends every stream at once.
func TestEventsEndOnDrain(t *testing.T) {
	url, _, s, _ := newEventServer(t, Config{})
	st := openEvents(t, url+"/v1/events", "", "")
	s.SetDraining()
	select {
	case _, ok := <-st.events:
		for ok {
			_, ok = <-st.events
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stream still open 10 s after draining began")
	}
}

// The stats of a model count the requests it answered, per version and
// minute; a bad window names the field.
func TestModelStats(t *testing.T) {
	url, _, _, _ := newEventServer(t, Config{})
	for range 5 {
		if r := post(t, url+"/v1/models/fraud:predict", "application/json", `{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"}]}`, nil); r.status != 200 {
			t.Fatalf("predict: %d %s", r.status, r.body)
		}
	}
	r := send(t, "GET", url+"/v1/models/fraud/stats?window=5m", "", nil)
	var st api.ModelStats
	if err := json.Unmarshal(r.body, &st); err != nil || r.status != 200 || st.Window != "5m" || st.Step != "1m" || len(st.Versions) == 0 {
		t.Fatalf("stats: %d %s", r.status, r.body)
	}
	var n int64
	for _, p := range st.Versions[0].Points {
		n += p.Count
		if p.P50Ms <= 0 || p.P99Ms < p.P50Ms || p.Errors != 0 {
			t.Errorf("point %+v", p)
		}
	}
	if st.Versions[0].Version != "fraud@1" || n != 5 {
		t.Errorf("stats %s: want 5 requests of fraud@1", r.body)
	}
	for q, want := range map[string]int{"window=1m": 400, "window=25h": 400, "window=90s": 400, "window=x": 400, "": 200, "window=24h": 200} {
		if r := send(t, "GET", url+"/v1/models/fraud/stats?"+q, "", nil); r.status != want || (want == 400 && r.err.Field != "window") {
			t.Errorf("%s: %d %s, want %d", q, r.status, r.body, want)
		}
	}
	if r := send(t, "GET", url+"/v1/models/nope/stats", "", nil); r.status != 404 {
		t.Errorf("unknown model: %d", r.status)
	}
}
