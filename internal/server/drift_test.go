package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sluiceml/sluice/internal/drift"
)

// TestDriftFlagsTheShiftedFeatureOnly publishes a model with a reference
// sample, sends traffic whose x is shifted by 2σ and whose z is not, and
// checks the drift report: x drifted, z and the output (which reads z only)
// did not.
func TestDriftFlagsTheShiftedFeatureOnly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	var ref strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&ref, `{"x":%.4f,"z":%.4f}`+"\n", rng.NormFloat64(), rng.NormFloat64())
	}
	fsys := fstest.MapFS{
		"d/model.yaml": {Data: []byte(`name: d
runtime: linear
artifact: m.json
input: {schema: s@1, fields: [{name: x, type: float}, {name: z, type: float}]}
output: {schema: o@1, fields: [{name: y}]}
drift: {reference: reference.jsonl, bins: 10, minSamples: 200}
`)},
		"d/m.json":          {Data: []byte(`{"weights":[[0,1]],"bias":[0],"link":"logistic"}`)},
		"d/reference.jsonl": {Data: []byte(ref.String())},
	}
	ts, _ := newTestServerFS(t, Config{}, fsys)
	report := func() drift.Report {
		resp, err := http.Get(ts.URL + "/v1/models/d/versions/1/drift")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("drift: %d", resp.StatusCode)
		}
		var r drift.Report
		json.NewDecoder(resp.Body).Decode(&r)
		return r
	}
	send := func(n int, shift float64) {
		var b strings.Builder
		b.WriteString(`{"instances":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"x":%.4f,"z":%.4f}`, rng.NormFloat64()+shift, rng.NormFloat64())
		}
		b.WriteString(`]}`)
		if r := post(t, ts.URL+"/v1/models/d:predict", "application/json", b.String(), nil); r.status != 200 {
			t.Fatalf("predict: %d %s", r.status, r.body)
		}
	}
	send(100, 2)
	if r := report(); r.Features[0].Enough || r.Features[0].Flagged {
		t.Fatalf("judged on %d samples, below minSamples 200: %+v", r.Features[0].Samples, r.Features[0])
	}
	for i := 0; i < 9; i++ {
		send(100, 2)
	}
	r := report()
	byName := map[string]drift.Drift{}
	for _, d := range append(r.Features, r.Outputs...) {
		byName[d.Name] = d
	}
	x, z, y := byName["x"], byName["z"], byName["output:y"]
	t.Logf("PSI x %.3f, z %.3f, output %.3f over %d rows", x.PSI, z.PSI, y.PSI, r.Samples)
	if !x.Flagged || x.PSI <= 0.2 {
		t.Errorf("shifted feature x: PSI %.3f, flagged %v; want > 0.2 and flagged", x.PSI, x.Flagged)
	}
	if z.Flagged || z.PSI > 0.1 || y.Flagged || y.PSI > 0.1 {
		t.Errorf("unshifted z (PSI %.3f) or output (PSI %.3f) flagged", z.PSI, y.PSI)
	}
	resp, err := http.Get(ts.URL + "/v1/models/churn/versions/1/drift")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // else its connection, and two goroutines, outlive the test
	if resp.StatusCode != 404 {
		t.Errorf("a model without drift: %d, want 404", resp.StatusCode)
	}
}
