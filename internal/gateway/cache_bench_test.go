package gateway

import (
	"context"
	"strconv"
	"testing"

	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/tenant"
)

// The gateway's own cost of a 1-row call, without the cache (add@2) and
// with it at 0 % hits (every row new: lookup, flight, store, eviction
// once full) and at 100 % hits (docs/benchmarks.md, "Issue 19: prediction
// cache"). The backend is the summing fake: no queue, no model.
func benchmarkGateway(b *testing.B, version int, repeat bool) {
	g, _, _, _, _ := newCachedGateway(&testing.T{})
	g.Metrics = nil
	ctx := context.Background()
	insts := make([]schema.Instance, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := i
		if repeat {
			n = i % 100
		}
		insts[0] = inst(strconv.Itoa(n), "0.5")
		c := Call{Transport: HTTP, Tenant: tenant.Default, RequestID: "r", Model: "add", Version: version,
			Decode: func() (Input, error) { return Input{Instances: insts}, nil }}
		if a := g.Predict(ctx, c); a.Err != nil {
			b.Fatal(a.Err)
		}
	}
}

func BenchmarkGatewayNoCache(b *testing.B)   { benchmarkGateway(b, 2, false) }
func BenchmarkGatewayCacheMiss(b *testing.B) { benchmarkGateway(b, 1, false) }
func BenchmarkGatewayCacheHit(b *testing.B)  { benchmarkGateway(b, 1, true) }
