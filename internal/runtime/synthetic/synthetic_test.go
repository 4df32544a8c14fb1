package synthetic

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/runtime"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Cost
		wantErr string // substring; "" means success
	}{
		{name: "seed curve", in: `{"base": "1.7ms", "perInstance": "0.32ms", "mode": "spin"}`,
			want: Cost{Base: 1700 * time.Microsecond, PerInstance: 320 * time.Microsecond, Mode: ModeSpin}},
		{name: "sleep", in: `{"base": "2ms", "mode": "sleep"}`, want: Cost{Base: 2 * time.Millisecond, Mode: ModeSleep}},
		{name: "empty is free spin", in: `{}`, want: Cost{Mode: ModeSpin}},
		{name: "test keys", in: `{"base": "0s", "panicEvery": 3, "failEvery": 5}`, want: Cost{Mode: ModeSpin, PanicEvery: 3, FailEvery: 5}},
		{name: "nulls are absent", in: `{"base": null, "mode": null}`, want: Cost{Mode: ModeSpin}},
		{name: "unknown key", in: `{"base": "1ms", "perinstance": "1ms"}`, wantErr: `unknown key "perinstance"`},
		{name: "number duration", in: `{"base": 2}`, wantErr: `base must be a duration string`},
		{name: "bad duration", in: `{"perInstance": "fast"}`, wantErr: `perInstance: "fast" is not a duration`},
		{name: "negative", in: `{"base": "-1ms"}`, wantErr: `base must not be negative`},
		{name: "absurd base", in: `{"base": "1h"}`, wantErr: `base must be at most 10s`},
		{name: "absurd perInstance", in: `{"perInstance": "2s"}`, wantErr: `perInstance must be at most 1s`},
		{name: "bad mode", in: `{"mode": "gpu"}`, wantErr: `mode "gpu" is not known`},
		{name: "mode type", in: `{"mode": 1}`, wantErr: `mode must be a string`},
		{name: "negative every", in: `{"panicEvery": -1}`, wantErr: `panicEvery must not be negative`},
		{name: "fractional every", in: `{"failEvery": 2.5}`, wantErr: `failEvery must be a whole number`},
		{name: "string every", in: `{"failEvery": "2"}`, wantErr: `failEvery must be a whole number`},
		{name: "absurd every", in: `{"failEvery": 1e12}`, wantErr: `failEvery must be at most`},
		{name: "exitEvery", in: `{"exitEvery": 4}`, want: Cost{Mode: ModeSpin, ExitEvery: 4}},
		{name: "exitEvery null is absent", in: `{"exitEvery": null}`, want: Cost{Mode: ModeSpin}},
		{name: "exitEvery zero", in: `{"exitEvery": 0}`, wantErr: `exitEvery must be at least 1`},
		{name: "exitEvery negative", in: `{"exitEvery": -2}`, wantErr: `exitEvery must be at least 1`},
		{name: "exitEvery fractional", in: `{"exitEvery": 1.5}`, wantErr: `exitEvery must be a whole number`},
		{name: "exitEvery string", in: `{"exitEvery": "3"}`, wantErr: `exitEvery must be a whole number`},
		{name: "exitEvery bool", in: `{"exitEvery": true}`, wantErr: `exitEvery must be a whole number`},
		{name: "exitEvery absurd", in: `{"exitEvery": 1e12}`, wantErr: `exitEvery must be at most`},
		{name: "exitEvery misspelt", in: `{"exitevery": 3}`, wantErr: `unknown key "exitevery"`},
		{name: "memory", in: `{"memory": "64MiB"}`, want: Cost{Mode: ModeSpin, Memory: 64 << 20}},
		{name: "memory decimal units", in: `{"memory": "5MB"}`, want: Cost{Mode: ModeSpin, Memory: 5_000_000}},
		{name: "memory zero", in: `{"memory": "0KiB"}`, want: Cost{Mode: ModeSpin}},
		{name: "memory number", in: `{"memory": 1024}`, wantErr: `memory must be a size string`},
		{name: "memory no unit", in: `{"memory": "1024"}`, wantErr: `memory: size "1024" is not a size`},
		{name: "memory lowercase unit", in: `{"memory": "64mib"}`, wantErr: `memory: size "64mib" is not a size`},
		{name: "memory negative", in: `{"memory": "-1MiB"}`, wantErr: `memory: size "-1MiB" is not a size`},
		{name: "memory absurd", in: `{"memory": "65GiB"}`, wantErr: `memory must be at most 64GiB`},
		{name: "loadTime", in: `{"loadTime": "500ms"}`, want: Cost{Mode: ModeSpin, LoadTime: 500 * time.Millisecond}},
		{name: "loadTime number", in: `{"loadTime": 500}`, wantErr: `loadTime must be a duration string`},
		{name: "loadTime negative", in: `{"loadTime": "-1s"}`, wantErr: `loadTime must not be negative`},
		{name: "loadTime absurd", in: `{"loadTime": "11m"}`, wantErr: `loadTime must be at most 10m0s`},
		{name: "loadTime misspelt", in: `{"loadtime": "1s"}`, wantErr: `unknown key "loadtime"`},
		{name: "trailing", in: `{} {}`, wantErr: `trailing data`},
		{name: "not json", in: `base: 1ms`, wantErr: `decode cost.json`},
		{name: "empty input", in: ``, wantErr: `decode cost.json`},
		{name: "not an object", in: `null`, wantErr: `must be a JSON object`},
		{name: "array", in: `[1]`, wantErr: `decode cost.json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decode(%s) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%s): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("Decode(%s) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestCostFor(t *testing.T) {
	c, err := Decode([]byte(`{"base": "1.7ms", "perInstance": "0.32ms"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{{0, 1700 * time.Microsecond}, {1, 2020 * time.Microsecond}, {8, 4260 * time.Microsecond}, {32, 11940 * time.Microsecond}} {
		if got := c.For(tt.n); got != tt.want {
			t.Errorf("For(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

func TestRegistered(t *testing.T) {
	r, err := runtime.Lookup("synthetic")
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Load(context.Background(), runtime.Spec{Name: "s@1", Outputs: 3}, []byte(`{"mode":"sleep"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if info := m.Info(); info.Inputs != 0 || info.Outputs != 3 || !strings.Contains(info.Detail, "synthetic") {
		t.Fatalf("Info() = %+v", info)
	}
	if _, err := r.Load(context.Background(), runtime.Spec{}, []byte(`{"bogus":1}`)); err == nil {
		t.Fatal("Load accepted an unknown key")
	}
}

func batch(rows, cols int, vals ...float32) runtime.Batch {
	return runtime.Batch{Rows: rows, Cols: cols, Data: vals}
}

func TestPredictDeterministic(t *testing.T) {
	nan := float32(math.NaN())
	sig := func(z float64) float32 { return float32(1 / (1 + math.Exp(-z))) }
	tests := []struct {
		name    string
		spec    runtime.Spec
		in      runtime.Batch
		want    []float32
		outCols int
	}{
		{name: "one output", spec: runtime.Spec{}, in: batch(1, 2, 1, 2), outCols: 1,
			want: []float32{sig((1*1 + 2*2) / 2.0)}},
		{name: "two outputs two rows", spec: runtime.Spec{Outputs: 2}, in: batch(2, 2, 1, 2, -1, 0), outCols: 2,
			want: []float32{sig(5.0 / 2), sig(10.0 / 2), sig(-1.0 / 2), sig(-2.0 / 2)}},
		{name: "nan is zero", spec: runtime.Spec{Outputs: 1, Features: 3}, in: batch(1, 3, nan, 1, nan), outCols: 1,
			want: []float32{sig(2.0 / 3)}},
		{name: "zero width", spec: runtime.Spec{Outputs: 2}, in: batch(2, 0), outCols: 2,
			want: []float32{0.5, 0.5, 0.5, 0.5}},
		{name: "empty batch", spec: runtime.Spec{}, in: batch(0, 4), outCols: 1, want: []float32{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(Cost{Mode: ModeSpin}, tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			for round := 0; round < 2; round++ { // same answer every time
				out, err := m.Predict(context.Background(), tt.in)
				if err != nil {
					t.Fatal(err)
				}
				if out.Rows != tt.in.Rows || out.Cols != tt.outCols || len(out.Data) != len(tt.want) {
					t.Fatalf("shape %d×%d (%d values), want %d×%d (%d)", out.Rows, out.Cols, len(out.Data), tt.in.Rows, tt.outCols, len(tt.want))
				}
				for i := range tt.want {
					if math.Abs(float64(out.Data[i]-tt.want[i])) > 1e-6 {
						t.Fatalf("round %d: out[%d] = %v, want %v", round, i, out.Data[i], tt.want[i])
					}
				}
			}
		})
	}
}

func TestPredictErrors(t *testing.T) {
	m, err := New(Cost{Mode: ModeSpin}, runtime.Spec{Features: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Predict(context.Background(), batch(1, 3, 1, 2, 3)); err == nil || !strings.Contains(err.Error(), "expects 2") {
		t.Fatalf("wrong width: err = %v", err)
	}
	if _, err := m.Predict(context.Background(), batch(2, 2, 1, 2, 3)); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("malformed batch: err = %v", err)
	}
	if _, err := New(Cost{}, runtime.Spec{Outputs: -1}); err == nil {
		t.Fatal("New accepted negative outputs")
	}
}

func TestSleepRespectsContext(t *testing.T) {
	m, err := New(Cost{Base: MaxBase, Mode: ModeSleep}, runtime.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := m.Predict(ctx, batch(1, 1, 1))
		done <- err
	}()
	cancel()
	// A 10 s sleep that ignored ctx would trip the test binary's timeout;
	// this waits on the result, not on a clock.
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Predict after cancel = %v, want context.Canceled", err)
	}
}

func TestSpinAndSleepPay(t *testing.T) {
	for _, mode := range []string{ModeSpin, ModeSleep} {
		m, err := New(Cost{Base: 100 * time.Microsecond, PerInstance: 10 * time.Microsecond, Mode: mode}, runtime.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := m.Predict(context.Background(), batch(2, 1, 1, 2))
		if err != nil || out.Rows != 2 {
			t.Fatalf("%s: out %+v, err %v", mode, out, err)
		}
	}
}

func TestFailAndPanicEvery(t *testing.T) {
	m, err := New(Cost{Mode: ModeSpin, FailEvery: 3}, runtime.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	var fails []int
	for call := 1; call <= 7; call++ {
		if _, err := m.Predict(context.Background(), batch(1, 1, 1)); err != nil {
			fails = append(fails, call)
		}
	}
	if len(fails) != 2 || fails[0] != 3 || fails[1] != 6 {
		t.Fatalf("failing calls = %v, want [3 6]", fails)
	}

	m, err = New(Cost{Mode: ModeSpin, PanicEvery: 2}, runtime.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	panicked := func() (p bool) {
		defer func() { p = recover() != nil }()
		_, _ = m.Predict(context.Background(), batch(1, 1, 1))
		return false
	}
	got := []bool{panicked(), panicked(), panicked(), panicked()}
	if got[0] || !got[1] || got[2] || !got[3] {
		t.Fatalf("panics per call = %v, want [false true false true]", got)
	}
}

func TestDeclaredMemory(t *testing.T) {
	for art, want := range map[string]int64{
		`{"base":"1ms","memory":"48MiB"}`: 48 << 20,
		`{"base":"1ms"}`:                  0,
		`{"base":"1ms","memory":"lots"}`:  0, // does not decode: nothing declared
		`not json`:                        0,
	} {
		if got := (Runtime{}).DeclaredMemory([]byte(art)); got != want {
			t.Errorf("DeclaredMemory(%s) = %d, want %d", art, got, want)
		}
	}
}
