package gateway

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/vstats"
)

// shadowBackend answers each row with out (cols columns), or fails with
// err; with a gate, each call first says it started, then waits.
type shadowBackend struct {
	out     []float32 // one row's outputs
	err     error
	started chan struct{}
	gate    chan struct{}
	prio    chan serving.Priority // the priority of each call, if set
}

func (b *shadowBackend) Submit(ctx context.Context, w serving.Work) (serving.Result, error) {
	if b.prio != nil {
		b.prio <- w.Priority
	}
	if b.gate != nil {
		b.started <- struct{}{}
		<-b.gate
	}
	if b.err != nil {
		return serving.Result{}, b.err
	}
	out := runtime.Output{Rows: w.Rows.Rows, Cols: len(b.out)}
	for range w.Rows.Rows {
		out.Data = append(out.Data, b.out...)
	}
	return serving.Result{Out: out}, nil
}

func shadowTarget(t *testing.T, be routing.Backend) *routing.Target {
	t.Helper()
	spec, err := modelpkg.Parse("add/model.yaml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	return &routing.Target{Model: "add", N: 2, ID: "add@2", Spec: spec, Server: be}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Each outcome of a shadow copy lands in its own counter; agreement is
// compared row by row against the primary.
func TestShadowOutcomes(t *testing.T) {
	cases := []struct {
		name      string
		be        *shadowBackend
		instances []schema.Instance
		primary   []float32
		want      vstats.ShadowSnapshot
	}{
		{"agrees", &shadowBackend{out: []float32{0.9}}, []schema.Instance{inst("1", "2"), inst("3", "4")}, []float32{0.8, 0.7},
			vstats.ShadowSnapshot{Requests: 1, Rows: 2, Values: 2}},
		{"disagrees", &shadowBackend{out: []float32{0.1}}, []schema.Instance{inst("1", "2"), inst("3", "4")}, []float32{0.8, 0.2},
			vstats.ShadowSnapshot{Requests: 1, Rows: 2, Values: 2, Disagreements: 1}},
		{"model error", &shadowBackend{err: errs.New(errs.Internal, "boom")}, []schema.Instance{inst("1", "2")}, []float32{0.8},
			vstats.ShadowSnapshot{Errors: 1}},
		{"queue full is a drop", &shadowBackend{err: errs.New(errs.QueueFull, "full")}, []schema.Instance{inst("1", "2")}, []float32{0.8},
			vstats.ShadowSnapshot{Dropped: 1}},
		{"other outputs", &shadowBackend{out: []float32{0.1, 0.9}}, []schema.Instance{inst("1", "2")}, []float32{0.8},
			vstats.ShadowSnapshot{Incompatible: 1}},
		{"schema refuses the instance", &shadowBackend{out: []float32{0.9}}, []schema.Instance{inst("nope", "2")}, []float32{0.8},
			vstats.ShadowSnapshot{Errors: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stats := &vstats.Set{}
			s := NewShadows(stats, discard(), 1, 4, time.Minute)
			defer s.Close()
			tg := shadowTarget(t, c.be)
			s.run(shadowJob{target: tg, rows: instanceRows(c.instances), primary: c.primary, cols: 1})
			g := stats.Get(tg.ID).Snapshot().Shadow
			type counts struct{ requests, rows, values, disagreements, errors, dropped, incompatible int64 }
			got := counts{g.Requests, g.Rows, g.Values, g.Disagreements, g.Errors, g.Dropped, g.Incompatible}
			w := c.want
			want := counts{w.Requests, w.Rows, w.Values, w.Disagreements, w.Errors, w.Dropped, w.Incompatible}
			if got != want {
				t.Errorf("shadow figures %+v, want %+v", got, want)
			}
		})
	}
}

// Copies run at low priority, off the request's path; a copy that finds
// the queue full is dropped and counted, never waited for; Close stops
// the workers with copies still queued.
func TestShadowQueueIsBounded(t *testing.T) {
	stats := &vstats.Set{}
	be := &shadowBackend{out: []float32{0.9}, started: make(chan struct{}), gate: make(chan struct{}), prio: make(chan serving.Priority, 8)}
	s := NewShadows(stats, discard(), 1, 1, time.Minute)
	tg := shadowTarget(t, be)
	job := shadowJob{target: tg, rows: instanceRows{inst("1", "2")}, primary: []float32{0.8}, cols: 1}
	s.offer(job) // taken by the one worker, held at the gate
	<-be.started
	if p := <-be.prio; p != serving.Low {
		t.Errorf("a shadow copy ran at priority %v, want Low", p)
	}
	s.offer(job) // queued
	done := make(chan struct{})
	go func() {
		s.offer(job) // no room: dropped at once
		close(done)
	}()
	<-done
	if d := stats.Get(tg.ID).Shadow.Dropped.Load(); d != 1 {
		t.Errorf("dropped %d, want 1", d)
	}
	close(be.gate) // the held copy finishes; the worker may take the queued one
	go func() {
		for range be.started {
		}
	}()
	s.Close()
	close(be.started)
	if r := stats.Get(tg.ID).Shadow.Requests.Load(); r < 1 || r > 2 {
		t.Errorf("compared %d copies, want the held one (and maybe the queued one)", r)
	}
}
