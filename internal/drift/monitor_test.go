package drift

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is an injected clock; tests move it by hand.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

var (
	featureNames = []string{"amount", "age", "score", "is_web", "is_app", "tenure"}
	outputNames  = []string{"p_fraud"}
)

// population draws rows like a small fraud model's traffic: four standard
// normal features, a one-hot pair (30 % web) and a score output. shift
// moves one feature by that many σ; outShift moves the output's logit.
type population struct {
	shiftFeature int // -1: none
	shift        float64
	outShift     float64
}

var same = population{shiftFeature: -1}

func (p population) row(r *rand.Rand) (features, outputs []float32) {
	f := make([]float32, 6)
	for _, j := range []int{0, 1, 2, 5} {
		f[j] = float32(r.NormFloat64())
	}
	if r.Float64() < 0.3 {
		f[3] = 1
	} else {
		f[4] = 1
	}
	if p.shiftFeature >= 0 {
		f[p.shiftFeature] += float32(p.shift)
	}
	logit := 0.5*float64(f[2]) + 0.2*float64(f[3]) - 1 + p.outShift
	return f, []float32{float32(1 / (1 + math.Exp(-logit)))}
}

func reference(t testing.TB, n int) Reference {
	r := rand.New(rand.NewPCG(1, 2))
	rows, outs := make([][]float32, n), make([][]float32, n)
	for i := range rows {
		rows[i], outs[i] = same.row(r)
	}
	ref := BuildReference(featureNames, outputNames, rows, outs, 10)
	if err := ref.Check(featureNames, outputNames); err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestMonitorPSI(t *testing.T) {
	ref := reference(t, 5000)
	if got := len(ref.Features[3].Counts); got != 2 {
		t.Fatalf("one-hot column has %d bins, want 2", got)
	}
	type want struct {
		flagged    []string // features and outputs with PSI > 0.2
		quietBelow float64  // every other PSI is below this
	}
	tests := []struct {
		name string
		pop  population
		want want
	}{
		{"identical distribution", same, want{nil, 0.05}},
		{"amount +2σ", population{shiftFeature: 0, shift: 2}, want{[]string{"amount"}, 0.1}},
		{"tenure -2σ", population{shiftFeature: 5, shift: -2}, want{[]string{"tenure"}, 0.1}},
		// score feeds the output: both move.
		{"score +2σ", population{shiftFeature: 2, shift: 2}, want{[]string{"score", "p_fraud"}, 0.1}},
		{"output drift only", population{shiftFeature: -1, outShift: 1.5}, want{[]string{"p_fraud"}, 0.1}},
		{"small shift is not drift", population{shiftFeature: 1, shift: 0.1}, want{nil, 0.1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			m, err := NewMonitor(ref, Config{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < 2000; i++ {
				m.Observe(tt.pop.row(r))
				clk.Advance(100 * time.Millisecond) // 200 s: well inside the window
			}
			rep := m.Report()
			if rep.Samples != 2000 {
				t.Fatalf("samples %d, want 2000", rep.Samples)
			}
			flagged := map[string]bool{}
			for _, n := range tt.want.flagged {
				flagged[n] = true
			}
			for _, d := range append(rep.Features, rep.Outputs...) {
				t.Logf("%-8s psi %.4f", d.Name, d.PSI)
				if !d.Enough || d.Samples != 2000 {
					t.Errorf("%s: enough %v samples %d, want true 2000", d.Name, d.Enough, d.Samples)
				}
				switch {
				case flagged[d.Name] && (!d.Flagged || d.PSI <= FlagPSI):
					t.Errorf("%s: psi %.4f flagged %v, want > %v and flagged", d.Name, d.PSI, d.Flagged, FlagPSI)
				case !flagged[d.Name] && (d.Flagged || d.PSI >= tt.want.quietBelow):
					t.Errorf("%s: psi %.4f flagged %v, want < %v", d.Name, d.PSI, d.Flagged, tt.want.quietBelow)
				}
			}
		})
	}
}

func TestMonitorMissing(t *testing.T) {
	ref := Reference{Features: []Hist{{Name: "x", Edges: []float64{0}, Counts: []float64{45, 45}, Missing: 10}}}
	clk := newClock()
	m, err := NewMonitor(ref, Config{Now: clk.Now, MinSamples: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		v := float32(i%2*2 - 1) // -1, 1, …
		if i%2 == 0 && i < 80 {
			v = float32(math.NaN()) // 40 % missing
		}
		m.Observe([]float32{v, 99}, nil) // the extra value is ignored
	}
	d := m.Report().Features[0]
	if d.Samples != 100 || d.MissingShare != 0.4 || d.RefMissingShare != 0.1 {
		t.Fatalf("samples %d missing %v ref missing %v, want 100 0.4 0.1", d.Samples, d.MissingShare, d.RefMissingShare)
	}
	// Bins: (-inf,0] 10, (0,inf) 50, missing 40 against 45, 45, 10.
	want := PSI([]float64{45, 45, 10}, []float64{10, 50, 40})
	if math.Abs(d.PSI-want) > 1e-12 || !d.Flagged {
		t.Fatalf("psi %v flagged %v, want %v flagged", d.PSI, d.Flagged, want)
	}
}

func TestMonitorNotEnough(t *testing.T) {
	clk := newClock()
	m, err := NewMonitor(reference(t, 1000), Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	shifted := population{shiftFeature: 0, shift: 5}
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < DefaultMinSamples-1; i++ {
		m.Observe(shifted.row(r))
	}
	for _, d := range append(m.Report().Features, m.Report().Outputs...) {
		if d.Enough || d.PSI != 0 || d.Flagged || d.Samples != DefaultMinSamples-1 {
			t.Fatalf("%+v: want not enough, psi 0, %d samples", d, DefaultMinSamples-1)
		}
	}
	m.Observe(shifted.row(r))
	if d := m.Report().Features[0]; !d.Enough || !d.Flagged {
		t.Fatalf("%+v: want enough and flagged at %d samples", d, DefaultMinSamples)
	}
}

func TestMonitorWindow(t *testing.T) {
	ref := Reference{Features: []Hist{{Name: "x", Edges: []float64{0}, Counts: []float64{1, 1}}}}
	type step struct {
		at      time.Duration // since the monitor started
		observe int           // rows to observe at that time (0: none)
		samples int64         // Report's samples at that time (-1: don't check)
		start   time.Duration // Report's window start
	}
	// Window 10 m in 10 sub-windows of 1 m.
	tests := []struct {
		name  string
		steps []step
	}{
		{"keeps the whole window", []step{
			{0, 100, 100, 0}, {5 * time.Minute, 50, 150, 0}, {9*time.Minute + 59*time.Second, 0, 150, 0},
		}},
		{"forgets the oldest sub-window", []step{
			{0, 100, 100, 0}, {5 * time.Minute, 50, 150, 0},
			{10 * time.Minute, 0, 50, time.Minute},
			{15*time.Minute + 30*time.Second, 0, 0, 6 * time.Minute},
		}},
		{"a quiet hour forgets everything", []step{
			{time.Second, 100, 100, 0}, {time.Hour, 0, 0, 51 * time.Minute}, {time.Hour, 7, 7, 51 * time.Minute},
		}},
		{"clock going back counts into the current sub-window", []step{
			{3 * time.Minute, 10, 10, 0}, {time.Minute, 10, 20, 0},
		}},
		{"observing rotates like reporting", []step{
			{0, 100, -1, 0}, {10 * time.Minute, 1, -1, 0}, {10 * time.Minute, 0, 1, time.Minute},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			t0 := clk.Now()
			m, err := NewMonitor(ref, Config{Window: 10 * time.Minute, Buckets: 10, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.steps {
				clk.ns.Store(t0.Add(s.at).UnixNano())
				for i := 0; i < s.observe; i++ {
					m.Observe([]float32{float32(i % 2)}, nil)
				}
				if s.samples < 0 {
					continue
				}
				rep := m.Report()
				if rep.Samples != s.samples || rep.Features[0].Samples != s.samples {
					t.Fatalf("at %v: samples %d (feature %d), want %d", s.at, rep.Samples, rep.Features[0].Samples, s.samples)
				}
				if got := rep.Start.Sub(t0); got != s.start {
					t.Fatalf("at %v: window starts at +%v, want +%v", s.at, got, s.start)
				}
				// End is now, or the current sub-window's start if the
				// clock went back before it.
				if rep.End.Before(clk.Now()) {
					t.Fatalf("at %v: window ends at %v, before now %v", s.at, rep.End, clk.Now())
				}
			}
		})
	}
}

func TestMonitorShiftThenRecover(t *testing.T) {
	clk := newClock()
	m, err := NewMonitor(reference(t, 5000), Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	feed := func(p population, n int) {
		for i := 0; i < n; i++ {
			m.Observe(p.row(r))
			clk.Advance(time.Second)
		}
	}
	feed(population{shiftFeature: 0, shift: 2}, 300) // 5 minutes shifted
	if d := m.Report().Features[0]; !d.Flagged {
		t.Fatalf("shifted: %+v, want flagged", d)
	}
	feed(same, 900) // 15 minutes back to normal: the shift has left the window
	if d := m.Report().Features[0]; d.Flagged || d.PSI > 0.1 {
		t.Fatalf("recovered: %+v, want psi < 0.1", d)
	}
}

func TestMonitorConcurrent(t *testing.T) {
	clk := newClock()
	// Sub-windows of 1 s, so the observers below rotate often; they move
	// the clock 8 s in all, inside the 10 s window.
	m, err := NewMonitor(reference(t, 500), Config{Window: 10 * time.Second, Buckets: 10, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, rows = 4, 2000
	var wg, reader sync.WaitGroup
	done := make(chan struct{})
	reader.Add(1)
	go func() { // a reader racing the writers
		defer reader.Done()
		for {
			select {
			case <-done:
				return
			default:
				if rep := m.Report(); rep.Samples > goroutines*rows {
					t.Errorf("report has %d samples, more than observed", rep.Samples)
				}
			}
		}
	}()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, seed))
			for i := 0; i < rows; i++ {
				m.Observe(same.row(r))
				clk.Advance(time.Millisecond)
			}
		}(uint64(g))
	}
	wg.Wait()
	close(done)
	reader.Wait()
	rep := m.Report()
	if rep.Samples != goroutines*rows {
		t.Fatalf("samples %d, want %d", rep.Samples, goroutines*rows)
	}
	for _, d := range append(rep.Features, rep.Outputs...) {
		if d.Samples != goroutines*rows || d.Flagged {
			t.Errorf("%s: samples %d flagged %v (psi %.3f), want %d unflagged", d.Name, d.Samples, d.Flagged, d.PSI, goroutines*rows)
		}
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	clk := newClock()
	m, err := NewMonitor(reference(t, 500), Config{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	f, o := same.row(rand.New(rand.NewPCG(9, 9)))
	if n := testing.AllocsPerRun(1000, func() { m.Observe(f, o) }); n != 0 {
		t.Fatalf("Observe allocates %v times per call", n)
	}
}

func TestNewMonitorErrors(t *testing.T) {
	good := Reference{Features: []Hist{{Name: "x", Counts: []float64{1}}}}
	tests := []struct {
		name string
		ref  Reference
		cfg  Config
		err  string
	}{
		{"bad histogram", Reference{Features: []Hist{{Name: "x", Edges: []float64{1}, Counts: []float64{1}}}}, Config{}, `drift monitor: histogram "x": 1 bins need 0 edges, got 1`},
		{"too many buckets", good, Config{Buckets: MaxBuckets + 1}, "drift monitor: 1001 buckets"},
		{"window too short", good, Config{Window: 5, Buckets: 10}, "drift monitor: window 5ns is too short for 10 buckets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewMonitor(tt.ref, tt.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Fatalf("error %v, want %q", err, tt.err)
			}
		})
	}
}

func TestPSI(t *testing.T) {
	tests := []struct {
		name             string
		expected, actual []float64
		want             float64
	}{
		{"same", []float64{1, 2, 3}, []float64{10, 20, 30}, 0},
		{"hand computed", []float64{0.5, 0.5}, []float64{9, 1}, 0.4*math.Log(1.8) - 0.4*math.Log(0.2)},
		{"empty bin uses epsilon", []float64{1, 0}, []float64{1, 1}, (0.5-1)*math.Log(0.5/1) + (0.5-Epsilon)*math.Log(0.5/Epsilon)},
		{"empty actual", []float64{1, 1}, []float64{0, 0}, 0},
		{"lengths differ", []float64{1}, []float64{1, 1}, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PSI(tt.expected, tt.actual)
			if math.IsNaN(tt.want) != math.IsNaN(got) || math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("PSI = %v, want %v", got, tt.want)
			}
		})
	}
}

// BenchmarkObserve: six features (four continuous, one-hot pair), one
// output, ten bins, the clock inside one sub-window.
func BenchmarkObserve(b *testing.B) {
	clk := newClock()
	m, err := NewMonitor(reference(b, 5000), Config{Now: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	rows := make([][2][]float32, 1024)
	for i := range rows {
		rows[i][0], rows[i][1] = same.row(r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		row := &rows[i%len(rows)]
		m.Observe(row[0], row[1])
	}
}

// BenchmarkObserveParallel is BenchmarkObserve from every P at once, with
// the real clock.
func BenchmarkObserveParallel(b *testing.B) {
	m, err := NewMonitor(reference(b, 5000), Config{})
	if err != nil {
		b.Fatal(err)
	}
	f, o := same.row(rand.New(rand.NewPCG(1, 1)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Observe(f, o)
		}
	})
}
