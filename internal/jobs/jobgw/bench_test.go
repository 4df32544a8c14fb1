package jobgw

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/routing"
)

// BenchmarkPredict1000x28: the predictor's own cost on a 1,000-row chunk
// of 28 float fields (the backend sums rows: no model cost).
func BenchmarkPredict1000x28(b *testing.B) {
	var fields strings.Builder
	for i := range 28 {
		fmt.Fprintf(&fields, "    - {name: f%d, type: float}\n", i)
	}
	m := strings.Replace(manifest, "    - {name: a, type: float, min: 0}\n    - {name: b, type: float}\n    - {name: c, type: category, values: [x, y], default: x}\npreprocess:\n  - {op: ordinal, field: c}\n", fields.String(), 1)
	m = strings.Replace(m, "maxInstancesPerRequest: 8\n  maxQueueInstances: 16", "maxInstancesPerRequest: 1000\n  maxQueueInstances: 8192", 1)
	spec, err := modelpkg.Parse("add/model.yaml", []byte(m))
	if err != nil {
		b.Fatal(err)
	}
	tg := &routing.Target{Model: "add", N: 2, ID: "add@2", Spec: spec, Server: &backend{}}
	h := &routing.Holder{}
	h.Store(&routing.Table{Models: map[string]*routing.Entry{"add": {
		Routes: []routing.Route{{Range: routing.Range{Version: 2, Lo: 0, Hi: routing.Buckets}, Target: tg}}, Versions: map[int]*routing.Target{2: tg},
	}}})
	p := &Predictor{Gateway: &gateway.Gateway{Table: h}}
	rows := make([]jobio.Row, 1000)
	for i := range rows {
		r := jobio.Row{}
		for j := range 28 {
			r[fmt.Sprintf("f%d", j)] = float64(i*j) * 0.37
		}
		rows[i] = r
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Predict(context.Background(), "default", "add", 2, rows); err != nil {
			b.Fatal(err)
		}
	}
}
