package oip

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/testwait"
)

func load(t *testing.T, spec runtime.Spec, artifact []byte) runtime.Model {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rt, err := runtime.Lookup("oip")
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.Load(ctx, spec, artifact)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// rows returns n rows of d deterministic features, NaN-free.
func rows(n, d int) runtime.Batch {
	b := runtime.Batch{Rows: n, Cols: d, Data: make([]float32, n*d)}
	for i := range b.Data {
		b.Data[i] = float32(math.Sin(float64(i)*0.37)) * 2
	}
	return b
}

func checkFormula(t *testing.T, in runtime.Batch, out runtime.Output) {
	t.Helper()
	if out.Rows != in.Rows || out.Cols != 1 || len(out.Data) != in.Rows {
		t.Fatalf("output %d×%d with %d values for %d rows", out.Rows, out.Cols, len(out.Data), in.Rows)
	}
	for r := range in.Rows {
		if got, want := float64(out.Data[r]), formula(in.Row(r)); math.Abs(got-want) > 1e-6 {
			t.Fatalf("row %d %v: got %v, the formula gives %v", r, in.Row(r), got, want)
		}
	}
}

func TestPredictMatchesFormula(t *testing.T) {
	srv := startServer(t)
	for _, model := range []string{"linear", "linear_typed"} { // raw and typed answers
		t.Run(model, func(t *testing.T) {
			m := load(t, runtime.Spec{Name: "lin@1", Features: 4, Outputs: 1}, srv.endpoint(model, "input__0", "output__0"))
			if info := m.Info(); info.Inputs != 4 || info.Outputs != 1 || info.Sequence || !strings.Contains(info.Detail, srv.addr) {
				t.Fatalf("info %+v", info)
			}
			for _, n := range []int{1, 7, 100} {
				in := rows(n, 4)
				out, err := m.Predict(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				checkFormula(t, in, out)
			}
			if calls, got := srv.stats(t, model); calls != 3 || got != 108 {
				t.Fatalf("server counted %d calls, %d rows; want 3, 108", calls, got)
			}
		})
	}
}

func TestPredictSequence(t *testing.T) {
	srv := startServer(t)
	m := load(t, runtime.Spec{Name: "seq@1", Outputs: 2, Sequence: true, PadValue: 7}, srv.endpoint("seq", "tokens", "output__0"))
	if info := m.Info(); !info.Sequence || info.Inputs != 0 || info.Outputs != 2 {
		t.Fatalf("info %+v", info)
	}
	in := runtime.Batch{Rows: 3, Tokens: [][]int64{{1, 2, 3}, {10}, {4, 5}}}
	out, err := m.Predict(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	// The server answers (sum of the padded row, padded length): rows are
	// padded to the longest (3) with the pad value 7.
	want := []float32{6, 3, 10 + 7 + 7, 3, 4 + 5 + 7, 3}
	if out.Rows != 3 || out.Cols != 2 || !equal(out.Data, want) {
		t.Fatalf("got %d×%d %v, want 3×2 %v", out.Rows, out.Cols, out.Data, want)
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLoadErrors(t *testing.T) {
	srv := startServer(t)
	lin := runtime.Spec{Name: "lin@1", Features: 4, Outputs: 1}
	cases := []struct {
		name     string
		spec     runtime.Spec
		artifact []byte
		want     []string
	}{
		{"wrong d", runtime.Spec{Features: 5, Outputs: 1}, srv.endpoint("linear", "input__0", "output__0"),
			[]string{`model "linear" at ` + srv.addr, `input "input__0" reads 4 features per row (shape [-1 4]), the package's schema produces 5`}},
		{"wrong k", runtime.Spec{Features: 4, Outputs: 3}, srv.endpoint("linear", "input__0", "output__0"),
			[]string{srv.addr, `output "output__0" has 1 columns (shape [-1 1]), the package declares 3 outputs`}},
		{"unknown model", lin, srv.endpoint("nosuch", "input__0", "output__0"),
			[]string{`model "nosuch" at ` + srv.addr, "not ready"}},
		{"unknown version", lin, []byte("address: " + srv.addr + "\nmodel: linear\nversion: \"9\"\ninput: input__0\noutput: output__0\n"),
			[]string{`model "linear" version "9" at ` + srv.addr, "not ready"}},
		{"unknown input", lin, srv.endpoint("linear", "x", "output__0"),
			[]string{srv.addr, `the model has no input "x" (its inputs: "input__0")`}},
		{"unknown output", lin, srv.endpoint("linear", "input__0", "y"),
			[]string{srv.addr, `the model has no output "y" (its outputs: "output__0")`}},
		{"float package, token model", runtime.Spec{Features: 4, Outputs: 2}, srv.endpoint("seq", "tokens", "output__0"),
			[]string{`input "tokens" is INT64, the oip runtime sends FP32`}},
		{"sequence package, float model", runtime.Spec{Outputs: 1, Sequence: true}, srv.endpoint("linear", "input__0", "output__0"),
			[]string{`input "input__0" is FP32, the oip runtime sends INT64`}},
		{"nobody listening", lin, []byte("address: 127.0.0.1:1\nmodel: linear\ninput: input__0\noutput: output__0\n"),
			[]string{`model "linear" at 127.0.0.1:1: model ready: gRPC Unavailable`}},
		{"bad artifact", lin, []byte("address: " + srv.addr + "\nmodel: linear\ninput: input__0\noutputs: output__0\n"),
			[]string{"oip: endpoint artifact: line 4: outputs: unknown key"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			m, err := Runtime{}.Load(ctx, c.spec, c.artifact)
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q\ndoes not contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "oip: ") {
				t.Fatalf("error without prefix: %v", err)
			}
		})
	}
}

// TestLyingServer: an answer one value short is an error naming the sizes.
func TestLyingServer(t *testing.T) {
	srv := startServer(t)
	m := load(t, runtime.Spec{Features: 4, Outputs: 1}, srv.endpoint("liar", "input__0", "output__0"))
	_, err := m.Predict(context.Background(), rows(5, 4))
	if err == nil || !strings.Contains(err.Error(), `output "output__0" has 16 bytes of raw contents, want 20 (5 rows × 1 columns × 4)`) {
		t.Fatalf("got %v", err)
	}
}

// TestDeadlineFlows: a server that never answers is bounded by the
// request's deadline, and the error says it was the caller's deadline.
func TestDeadlineFlows(t *testing.T) {
	srv := startServer(t)
	m := load(t, runtime.Spec{Features: 4, Outputs: 1}, srv.endpoint("hang", "input__0", "output__0"))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := m.Predict(ctx, rows(2, 4))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), srv.addr) {
		t.Fatalf("got %v, want a deadline error naming the endpoint", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Predict returned after %v", el)
	}
}

// TestEndpointTimeout: the artifact's timeout bounds a call when the
// request has no shorter deadline; the error is not the caller's deadline.
func TestEndpointTimeout(t *testing.T) {
	srv := startServer(t)
	art := []byte("address: " + srv.addr + "\nmodel: hang\ninput: input__0\noutput: output__0\ntimeout: 300ms\n")
	m := load(t, runtime.Spec{Features: 4, Outputs: 1}, art)
	_, err := m.Predict(context.Background(), rows(2, 4))
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within the endpoint timeout 300ms (gRPC DeadlineExceeded)") {
		t.Fatalf("got %v", err)
	}
}

// TestServerDies: once the server is gone, Predict returns an error naming
// the endpoint and the gRPC status, within the request's deadline.
func TestServerDies(t *testing.T) {
	srv := startServer(t)
	m := load(t, runtime.Spec{Features: 4, Outputs: 1}, srv.endpoint("linear", "input__0", "output__0"))
	if _, err := m.Predict(context.Background(), rows(3, 4)); err != nil {
		t.Fatal(err)
	}
	srv.kill(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := m.Predict(ctx, rows(3, 4))
	if err == nil || !strings.Contains(err.Error(), `oip: model "linear" at `+srv.addr+": infer: ") || !strings.Contains(err.Error(), "gRPC Unavailable") {
		t.Fatalf("got %v", err)
	}
	t.Logf("after the server died: %v (%v)", err, time.Since(start))
}

func TestBatchMismatch(t *testing.T) {
	srv := startServer(t)
	m := load(t, runtime.Spec{Features: 4, Outputs: 1}, srv.endpoint("linear", "input__0", "output__0"))
	for _, in := range []runtime.Batch{rows(2, 3), {Rows: 0, Cols: 4}, {Rows: 2, Cols: 4, Data: make([]float32, 7)}} {
		if _, err := m.Predict(context.Background(), in); err == nil {
			t.Fatalf("batch %d×%d (%d values) accepted", in.Rows, in.Cols, len(in.Data))
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// TestBatchingThroughServing puts the remote model behind Sluice's own
// batcher: 64 concurrent one-row requests reach the server in fewer calls.
func TestBatchingThroughServing(t *testing.T) {
	srv := startServer(t)
	m := load(t, runtime.Spec{Name: "lin@1", Features: 4, Outputs: 1}, srv.endpoint("linear", "input__0", "output__0"))
	s := serving.New(serving.Config{Name: "lin@1", MaxBatchSize: 32, MaxBatchDelay: 5 * time.Millisecond, MaxQueueInstances: 1000}, []runtime.Model{m})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	const n = 64
	all := rows(n, 4)
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			in := runtime.Batch{Rows: 1, Cols: 4, Data: all.Row(i)}
			res, err := s.Submit(ctx, serving.Work{Rows: in})
			if err != nil {
				errc <- err
				return
			}
			if got, want := float64(res.Out.Data[0]), formula(in.Data); res.Out.Rows != 1 || math.Abs(got-want) > 1e-6 {
				t.Errorf("request %d: got %v, the formula gives %v", i, res.Out.Data, want)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	calls, got := srv.stats(t, "linear")
	t.Logf("%d one-row requests reached the server as %d ModelInfer calls (%.1f rows per call)", n, calls, float64(got)/float64(calls))
	if got != n || calls >= n {
		t.Fatalf("server saw %d calls with %d rows for %d requests: want all rows in fewer calls", calls, got, n)
	}
}

// TestServerDiesMidCall: the server dies while a call is in flight; Predict
// returns an error at once instead of waiting for its deadline.
func TestServerDiesMidCall(t *testing.T) {
	srv := startServer(t)
	m := load(t, runtime.Spec{Features: 4, Outputs: 1}, srv.endpoint("hang", "input__0", "output__0"))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := m.Predict(ctx, rows(2, 4))
		errc <- err
	}()
	testwait.Until(t, 10*time.Second, func() bool { calls, _ := srv.stats(t, "hang"); return calls == 1 })
	srv.kill(t)
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), srv.addr) || !strings.Contains(err.Error(), "gRPC Unavailable") {
			t.Fatalf("got %v", err)
		}
		t.Logf("server killed mid-call: %v", err)
	case <-ctx.Done():
		t.Fatal("Predict still waiting at its deadline after the server died")
	}
}
