package jobhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluiceml/sluice/client"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/jobs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// gateway is the API's two routes the predictor calls, by hand: the
// version's description, and predict, which sums a and b, refuses an
// instance whose b is 13 (as a check the fields do not show would), and
// answers queue_full to the first call.
type gateway struct {
	mu       sync.Mutex
	calls    []int // instances per predict call
	full     int   // queue_full answers left
	priority []string
	ids      []string
	maxBody  int // > 0: a larger body is refused payload_too_large
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models/add/versions/2":
		min := 0.0
		json.NewEncoder(w).Encode(api.Version{Model: "add", Version: 2, ID: "add@2", State: "ready",
			Input:  &api.Input{Fields: []api.Field{{Name: "id", Type: "category", Values: []string{"r0", "r1", "r2", "r3", "r4", "r5"}, Optional: true}, {Name: "a", Type: "float", Min: &min}, {Name: "b", Type: "float"}}},
			Output: &api.Output{Fields: []string{"sum"}},
			Config: &api.Serving{MaxInstancesPerRequest: 2, MaxQueueInstances: 64}})
	case "/v1/models/add/versions/2:predict":
		var body struct{ Instances []map[string]any }
		b, _ := io.ReadAll(r.Body)
		if g.maxBody > 0 && len(b) > g.maxBody {
			w.WriteHeader(413)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "payload_too_large", Message: "request body exceeds the server's --max-body-bytes"}})
			return
		}
		json.Unmarshal(b, &body)
		g.mu.Lock()
		g.calls = append(g.calls, len(body.Instances))
		g.priority = append(g.priority, r.Header.Get("Sluice-Priority"))
		g.ids = append(g.ids, r.Header.Get("X-Request-Id"))
		full := g.full > 0
		g.full--
		g.mu.Unlock()
		if full {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "queue_full", Message: "the batch queue is full"}})
			return
		}
		var out api.PredictResponse
		for k, in := range body.Instances {
			if in["b"] == 13.0 {
				w.WriteHeader(400)
				json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "invalid_argument", Field: fmt.Sprintf("instances[%d].b", k), Message: fmt.Sprintf("instances[%d].b: unlucky", k)}})
				return
			}
			out.Predictions = append(out.Predictions, map[string]float64{"sum": in["a"].(float64) + in["b"].(float64)})
		}
		json.NewEncoder(w).Encode(out)
	default:
		w.WriteHeader(404)
		json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: "not_found", Message: "model version " + r.URL.Path + " not found"}})
	}
}

func TestPredict(t *testing.T) {
	g := &gateway{full: 1}
	srv := httptest.NewServer(g)
	defer srv.Close()
	p := New(client.New(srv.URL))
	ctx := jobs.WithChunk(context.Background(), "j1", 4)
	info, err := p.Version(ctx, "acme", "add", 2)
	if err != nil {
		t.Fatal(err)
	}
	if info.VersionID != "add@2" || len(info.Fields) != 3 || info.Fields[1] != (jobio.Field{Name: "a", Kind: jobio.Number}) || info.Outputs[0] != "sum" {
		t.Errorf("Version = %+v", info)
	}
	rows := []jobio.Row{
		{"id": "r0", "a": 1.0, "b": 2.0},
		{"id": "r1", "a": -1.0, "b": 2.0}, // below min: refused here
		{"id": "r2", "a": 1.0, "b": 13.0}, // refused by the gateway
		{"id": "r3", "a": 2.0, "b": 2.0},
		{"id": "r4", "a": 3.0, "b": 2.0, "c": 1.0}, // an unknown field: refused here
		{"id": "r5", "a": 4.0, "b": 2.0},
	}
	out, err := p.Predict(ctx, "acme", "add", 2, rows)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"map[sum:3]", "a: must be", "b: unlucky", "map[sum:4]", "c: unknown", "map[sum:6]"}
	for i, r := range out {
		got := fmt.Sprint(r.Outputs)
		if r.Err != nil {
			got = r.Err.Field + ": " + r.Err.Message
		}
		if !strings.HasPrefix(got, want[i]) && !strings.Contains(got, strings.TrimPrefix(want[i], "c: ")) {
			t.Errorf("row %d: %s, want %s…", i, got, want[i])
		}
	}
	// Four valid rows in calls of 2: [r0 r2] refused (queue full), [r0 r2]
	// refuses r2, [r0], [r3 r5].
	if fmt.Sprint(g.calls) != "[2 2 1 2]" {
		t.Errorf("calls %v, want [2 2 1 2]", g.calls)
	}
	for i, pr := range g.priority {
		if pr != "batch" {
			t.Errorf("call %d: Sluice-Priority %q, want batch", i, pr)
		}
	}
	if g.ids[0] != "job-j1-chunk-4-0" || g.ids[3] != "job-j1-chunk-4-1" {
		t.Errorf("request ids %v", g.ids)
	}
}

func TestErrors(t *testing.T) {
	srv := httptest.NewServer(&gateway{})
	p := New(client.New(srv.URL))
	ctx := context.Background()
	_, err := p.Version(ctx, "", "nope", 1)
	if errs.CodeOf(err) != errs.NotFound || !strings.Contains(err.Error(), "not found") {
		t.Errorf("Version of an unknown model: %v (%s), want not_found", err, errs.CodeOf(err))
	}
	if ok, _ := jobs.Retryable(err); ok {
		t.Error("not_found is retryable")
	}
	srv.Close()
	_, err = p.Predict(ctx, "", "add", 2, []jobio.Row{{"a": 1.0, "b": 1.0}})
	if ok, _ := jobs.Retryable(err); !ok || !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("a server that is gone: %v (%s), want a retryable error naming it", err, errs.CodeOf(err))
	}
}

// A call larger than the server's body bound is sent in halves until it
// fits.
func TestPredictSplitsLargeCalls(t *testing.T) {
	g := &gateway{maxBody: 30} // {"instances":[{"a":1,"b":1}]} fits, two instances do not
	srv := httptest.NewServer(g)
	defer srv.Close()
	p := New(client.New(srv.URL))
	rows := []jobio.Row{{"a": 1.0, "b": 1.0}, {"a": 2.0, "b": 1.0}}
	out, err := p.Predict(context.Background(), "", "add", 2, rows)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out[0].Outputs, out[1].Outputs) != "map[sum:2] map[sum:3]" {
		t.Errorf("outputs %v %v", out[0].Outputs, out[1].Outputs)
	}
	if fmt.Sprint(g.calls) != "[1 1]" {
		t.Errorf("calls that reached predict: %v, want [1 1] (the pair refused, then each alone)", g.calls)
	}
}
