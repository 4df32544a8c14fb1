package serving

import (
	"context"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/runtime"
)

// echoModel is a model that costs next to nothing: the benchmark measures
// the server around it.
type echoModel struct{}

func (echoModel) Info() runtime.Info { return runtime.Info{Inputs: 1, Outputs: 1} }
func (echoModel) Close() error       { return nil }
func (echoModel) Predict(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	return runtime.Output{Rows: in.Rows, Cols: 1, Data: []float32{in.Data[0]}}, nil
}

// BenchmarkSubmitOneRow is 1-row requests on one replica with
// maxBatchSize 1 (the fraud example's serving), inline execution on and
// off, from one goroutine and from GOMAXPROCS.
func BenchmarkSubmitOneRow(b *testing.B) {
	for _, mode := range []struct {
		name     string
		noInline bool
	}{{"inline", false}, {"queue", true}} {
		for _, par := range []bool{false, true} {
			name := mode.name + "/serial"
			if par {
				name = mode.name + "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				s := New(Config{Name: "bench@1", MaxBatchSize: 1, MaxQueueInstances: 1000, Logger: quiet(), noInline: mode.noInline},
					[]runtime.Model{echoModel{}})
				defer s.Close(context.Background())
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
				defer cancel()
				submit := func() {
					w := Work{Rows: runtime.Batch{Rows: 1, Cols: 1, Data: []float32{1}}}
					if _, err := s.Submit(ctx, w); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				if !par {
					for b.Loop() {
						submit()
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						submit()
					}
				})
			})
		}
	}
}
