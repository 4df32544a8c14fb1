//go:build cgo

package onnx

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/runtime"
)

// childEnv makes the test binary act as a child process that loads a model
// under a library setting of the parent's choosing and prints the error: the
// library is loaded once per process, so "not found" needs a fresh process.
const childEnv = "SLUICE_ONNX_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		if mode == "explicit" {
			SetLibraryPath("/nonexistent/flag/libonnxruntime.so.1")
		}
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "mlp", "model.onnx"))
		if err == nil {
			_, err = Runtime{}.Load(context.Background(), runtime.Spec{Name: "mlp@1", Features: 30, Outputs: 1}, data)
		}
		fmt.Printf("load error: %v\n", err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func load(t testing.TB, file string, features, outputs int, opts runtime.SessionOptions) runtime.Model {
	t.Helper()
	m, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "test@1", Features: features, Outputs: outputs, Session: opts}, readFixture(t, file))
	if err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

type reference struct {
	Features, Outputs int
	Cases             []struct {
		Rows          int
		Input, Output []float64
	}
}

func readReference(t testing.TB) reference {
	t.Helper()
	var ref reference
	if err := json.Unmarshal(readFixture(t, "mlp_reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) == 0 {
		t.Fatal("no reference cases")
	}
	return ref
}

func batchOf(rows, cols int, vals []float64) runtime.Batch {
	b := runtime.Batch{Rows: rows, Cols: cols, Data: make([]float32, len(vals))}
	for i, v := range vals {
		b.Data[i] = float32(v)
	}
	return b
}

// checkReference predicts every reference batch and compares with torch.
func checkReference(t *testing.T, m runtime.Model, ref reference) {
	t.Helper()
	for _, c := range ref.Cases {
		out, err := m.Predict(context.Background(), batchOf(c.Rows, ref.Features, c.Input))
		if err != nil {
			t.Fatalf("batch of %d: %v", c.Rows, err)
		}
		if out.Rows != c.Rows || out.Cols != ref.Outputs || len(out.Data) != len(c.Output) {
			t.Fatalf("batch of %d: output %d×%d (%d values), want %d×%d", c.Rows, out.Rows, out.Cols, len(out.Data), c.Rows, ref.Outputs)
		}
		for i, want := range c.Output {
			if got := float64(out.Data[i]); !(math.Abs(got-want) <= 1e-5) {
				t.Fatalf("batch of %d, value %d: onnx %v, torch %v (diff %g)", c.Rows, i, got, want, got-want)
			}
		}
	}
}

func TestMLPMatchesTorch(t *testing.T) {
	ref := readReference(t)
	m := load(t, "mlp", 30, 1, runtime.SessionOptions{})
	info := m.Info()
	if info.Inputs != 30 || info.Outputs != 1 {
		t.Errorf("Info() = %+v; want 30 inputs, 1 output", info)
	}
	for _, want := range []string{`input "features" float32 [batch, 30]`, `output "probability" float32 [batch, 1]`, "opset 17", "pytorch", "ONNX Runtime 1.30", "threads intra 1 inter 1"} {
		if !strings.Contains(info.Detail, want) {
			t.Errorf("Detail %q does not contain %q", info.Detail, want)
		}
	}
	seen := map[int]bool{}
	for _, c := range ref.Cases {
		seen[c.Rows] = true
	}
	if !seen[1] || !seen[7] {
		t.Fatalf("reference lacks batches of 1 and 7: %v", seen)
	}
	checkReference(t, m, ref)

	// Rows are independent: each row alone gives the same as in the batch.
	c := ref.Cases[len(ref.Cases)-1]
	for r := 0; r < c.Rows; r += 9 {
		out, err := m.Predict(context.Background(), batchOf(1, 30, c.Input[r*30:(r+1)*30]))
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(float64(out.Data[0]) - c.Output[r]); !(d <= 1e-5) {
			t.Errorf("row %d alone: %v, torch %v", r, out.Data[0], c.Output[r])
		}
	}
}

func TestMLPSessionOptions(t *testing.T) {
	m := load(t, "mlp", 30, 1, runtime.SessionOptions{IntraOpThreads: 2, InterOpThreads: 2})
	if !strings.Contains(m.Info().Detail, "threads intra 2 inter 2") {
		t.Errorf("Detail %q does not show the session options", m.Info().Detail)
	}
	checkReference(t, m, readReference(t))
}

func TestNaNPassedThrough(t *testing.T) {
	m := load(t, "mlp", 30, 1, runtime.SessionOptions{})
	b := runtime.Batch{Rows: 2, Cols: 30, Data: make([]float32, 60)}
	b.Data[5] = float32(math.NaN()) // row 0, feature 5 missing
	out, err := m.Predict(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(out.Data[0])) {
		t.Errorf("row with a NaN feature gave %v; the runtime passes NaN to the model as is and this MLP propagates it", out.Data[0])
	}
	if math.IsNaN(float64(out.Data[1])) || out.Data[1] <= 0 || out.Data[1] >= 1 {
		t.Errorf("row of zeros gave %v; want a probability", out.Data[1])
	}
}

// TestVectorAndMultiOutput: [batch] and [batch, 3] outputs with weights
// w[i] = (i+1)/100 (scripts/make_onnx_fixtures.py).
func TestVectorAndMultiOutput(t *testing.T) {
	x := make([]float64, 5*30)
	for i := range x {
		x[i] = float64(i%7) - 3
	}
	vec := load(t, "vec.onnx", 30, 1, runtime.SessionOptions{})
	three := load(t, "three.onnx", 30, 3, runtime.SessionOptions{})
	if i := vec.Info(); i.Inputs != 30 || i.Outputs != 1 {
		t.Errorf("vec Info() = %+v", i)
	}
	if i := three.Info(); i.Inputs != 30 || i.Outputs != 3 {
		t.Errorf("three Info() = %+v", i)
	}
	ov, err := vec.Predict(context.Background(), batchOf(5, 30, x))
	if err != nil {
		t.Fatal(err)
	}
	o3, err := three.Predict(context.Background(), batchOf(5, 30, x))
	if err != nil {
		t.Fatal(err)
	}
	if ov.Rows != 5 || ov.Cols != 1 || o3.Rows != 5 || o3.Cols != 3 {
		t.Fatalf("shapes %d×%d and %d×%d", ov.Rows, ov.Cols, o3.Rows, o3.Cols)
	}
	for r := 0; r < 5; r++ {
		var s float64
		s3 := make([]float64, 3)
		for i := 0; i < 30; i++ {
			v := x[r*30+i]
			s += v * float64(float32(float64(i+1)/100))
			for j := 0; j < 3; j++ {
				s3[j] += v * float64(float32(float64(i*3+j+1)/100))
			}
		}
		if d := math.Abs(float64(ov.Data[r]) - s); d > 1e-4 {
			t.Errorf("vec row %d: %v, want %v", r, ov.Data[r], s)
		}
		for j := 0; j < 3; j++ {
			if d := math.Abs(float64(o3.Row(r)[j]) - s3[j]); d > 1e-4 {
				t.Errorf("three row %d col %d: %v, want %v", r, j, o3.Row(r)[j], s3[j])
			}
		}
	}
}

func TestLoadErrors(t *testing.T) {
	mlp := readFixture(t, "mlp")
	// MatMul -> MatMuX keeps the protobuf valid: only ONNX Runtime can tell.
	badOp := bytes.Replace(readFixture(t, "vec.onnx"), []byte("MatMul"), []byte("MatMuX"), 1)
	cases := []struct {
		name              string
		data              []byte
		features, outputs int
		want              string
	}{
		{"wrong features", mlp, 29, 1, `onnx: input "features" has 30 features (shape [batch, 30]) but model.yaml's input schema produces 29`},
		{"wrong outputs", mlp, 30, 2, `onnx: output "probability" has 1 columns (shape [batch, 1]) but model.yaml declares 2 output fields`},
		{"float64", readFixture(t, "f64.onnx"), 30, 1, `input "x" is float64`},
		{"fixed batch", readFixture(t, "fixed.onnx"), 30, 1, `input "x" has a fixed batch dimension`},
		{"two inputs", readFixture(t, "two_inputs.onnx"), 30, 1, `the model has 2 inputs`},
		{"int output", readFixture(t, "int_out.onnx"), 30, 1, `output "label" is int64`},
		{"empty", nil, 30, 1, "onnx: not a valid ONNX model"},
		{"garbage", []byte("\x00\x01garbage, not a model\xff\xfe"), 30, 1, "onnx: not a valid ONNX model"},
		{"truncated", mlp[:len(mlp)-1000], 30, 1, "onnx: not a valid ONNX model"},
		{"unknown op", badOp, 30, 1, "onnx: ONNX Runtime could not load the model"},
	}
	for _, tc := range cases {
		m, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "bad@1", Features: tc.features, Outputs: tc.outputs}, tc.data)
		if err == nil {
			m.Close()
			t.Errorf("%s: loaded", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to contain %s", tc.name, err, tc.want)
		}
	}
}

// TestTruncatedEverywhere cuts the MLP at many points: each is a load error,
// never a panic or a crash of the process.
func TestTruncatedEverywhere(t *testing.T) {
	mlp := readFixture(t, "mlp")
	for cut := 0; cut < len(mlp); cut += 1 + len(mlp)/97 {
		m, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "cut@1", Features: 30, Outputs: 1}, mlp[:cut])
		if err == nil {
			m.Close()
			t.Errorf("cut at %d of %d bytes: loaded", cut, len(mlp))
		}
	}
}

func TestPredictErrors(t *testing.T) {
	m := load(t, "mlp", 30, 1, runtime.SessionOptions{})
	if _, err := m.Predict(context.Background(), runtime.Batch{Rows: 1, Cols: 29, Data: make([]float32, 29)}); err == nil || !strings.Contains(err.Error(), `input "features" expects 30`) {
		t.Errorf("29 features: %v", err)
	}
	if _, err := m.Predict(context.Background(), runtime.Batch{Rows: 2, Cols: 30, Data: make([]float32, 30)}); err == nil {
		t.Error("short data: no error")
	}
	out, err := m.Predict(context.Background(), runtime.Batch{Rows: 0, Cols: 30})
	if err != nil || out.Rows != 0 || out.Cols != 1 || len(out.Data) != 0 {
		t.Errorf("empty batch: %+v %v", out, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Predict(ctx, runtime.Batch{Rows: 1, Cols: 30, Data: make([]float32, 30)}); err == nil {
		t.Error("cancelled context: no error")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Predict(context.Background(), runtime.Batch{Rows: 1, Cols: 30, Data: make([]float32, 30)}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("after Close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestConcurrentReplicas: two models (replicas) of one version predict at
// the same time, each from its own goroutines one call at a time, and a
// third loads and closes meanwhile.
func TestConcurrentReplicas(t *testing.T) {
	ref := readReference(t)
	replicas := []runtime.Model{load(t, "mlp", 30, 1, runtime.SessionOptions{}), load(t, "mlp", 30, 1, runtime.SessionOptions{})}
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for i, m := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for iter := 0; iter < 40; iter++ {
				c := ref.Cases[(iter+i)%len(ref.Cases)]
				out, err := m.Predict(context.Background(), batchOf(c.Rows, 30, c.Input))
				if err != nil {
					errc <- err
					return
				}
				for j, want := range c.Output {
					if d := math.Abs(float64(out.Data[j]) - want); !(d <= 1e-5) {
						errc <- fmt.Errorf("replica %d iter %d value %d: %v, torch %v", i, iter, j, out.Data[j], want)
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for iter := 0; iter < 5; iter++ {
			m, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "mlp@2", Features: 30, Outputs: 1}, readFixture(t, "mlp"))
			if err != nil {
				errc <- err
				return
			}
			m.Close()
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// TestExamplePackage validates the mlp example's model.yaml
// (examples/mlp) with the example's model.onnx
// and checks its golden examples.
func TestExamplePackage(t *testing.T) {
	man, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "mlp", "model.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := modelpkg.FromFiles("examples/mlp", map[string][]byte{"model.yaml": man, "model.onnx": readFixture(t, "mlp")})
	if err != nil {
		t.Fatal(err)
	}
	spec := pkg.Spec
	if len(spec.Golden) < 3 {
		t.Fatalf("%d golden examples", len(spec.Golden))
	}
	rs := runtime.Spec{Name: "mlp@1", Features: spec.Schema.Width(), Outputs: len(spec.OutputNames), Session: *spec.Manifest.ONNX}
	m, err := Runtime{}.Load(context.Background(), rs, pkg.Artifact)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for i, g := range spec.Golden {
		out, err := m.Predict(context.Background(), runtime.Batch{Rows: 1, Cols: len(g.Row), Data: g.Row})
		if err != nil {
			t.Fatal(err)
		}
		want := g.Expect["probability"]
		if g.Tolerance > 1e-5 {
			t.Errorf("golden[%d] tolerance %g, want <= 1e-5", i, g.Tolerance)
		}
		if d := math.Abs(float64(out.Data[0]) - want); !(d <= g.Tolerance) {
			t.Errorf("golden[%d]: %v, torch %v", i, out.Data[0], want)
		}
	}
	// golden.json (for sluice bench and the docs) holds the same examples.
	var golden []struct {
		Expect map[string]float64 `json:"expect"`
	}
	if err := json.Unmarshal(readFixtureFile(t, filepath.Join("..", "..", "..", "examples", "mlp", "golden.json")), &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden) != len(spec.Golden) {
		t.Fatalf("golden.json has %d examples, model.yaml %d", len(golden), len(spec.Golden))
	}
	for i := range golden {
		if golden[i].Expect["probability"] != spec.Golden[i].Expect["probability"] {
			t.Errorf("golden.json[%d] %v, model.yaml %v", i, golden[i].Expect, spec.Golden[i].Expect)
		}
	}
}

func readFixtureFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLibraryErrors loads in child processes whose library setting cannot
// work: the message must say how to provide the library.
func TestLibraryErrors(t *testing.T) {
	notLib, _ := filepath.Abs(filepath.Join("testdata", "vec.onnx"))
	cases := []struct {
		name, mode, env string
		want            []string
	}{
		{"env names a missing file", "env", "/nonexistent/env/libonnxruntime.so.1",
			[]string{"SLUICE_ONNXRUNTIME_LIB names /nonexistent/env/libonnxruntime.so.1, which does not exist"}},
		{"flag names a missing file", "explicit", "/also/ignored.so",
			[]string{"--onnxruntime-lib names /nonexistent/flag/libonnxruntime.so.1, which does not exist"}},
		{"not a shared library", "env", notLib,
			[]string{"loading " + notLib + " (from SLUICE_ONNXRUNTIME_LIB) failed"}},
	}
	for _, tc := range cases {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+tc.mode, EnvLibrary+"="+tc.env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: child: %v\n%s", tc.name, err, out)
		}
		msg := string(out)
		want := append(tc.want, "--onnxruntime-lib", "SLUICE_ONNXRUNTIME_LIB", "scripts/fetch-onnxruntime.sh", "ONNX Runtime's shared library is not available")
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message does not contain %q:\n%s", tc.name, w, msg)
			}
		}
	}
}

func BenchmarkPredict(b *testing.B) {
	m := load(b, "mlp", 30, 1, runtime.SessionOptions{})
	ref := readReference(b)
	src := ref.Cases[len(ref.Cases)-1] // 64 rows
	for _, n := range []int{1, 8, 64, 128} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			batch := runtime.Batch{Rows: n, Cols: 30, Data: make([]float32, n*30)}
			for i := range batch.Data {
				batch.Data[i] = float32(src.Input[i%len(src.Input)])
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := m.Predict(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n)/1000, "µs/row")
		})
	}
}

// FuzzLoad: any bytes load or fail with an error; ONNX Runtime sees the
// ones that pass the model reader and the contract check.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"vec.onnx", "three.onnx", "rank3.onnx", "two_outputs.onnx"} {
		f.Add(readFixture(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Runtime{}.Load(context.Background(), runtime.Spec{Name: "fuzz@1", Features: 30, Outputs: 1}, data)
		if err != nil {
			if strings.Contains(err.Error(), "shared library is not available") {
				t.Fatal(err)
			}
			return
		}
		defer m.Close()
		out, err := m.Predict(context.Background(), runtime.Batch{Rows: 2, Cols: 30, Data: make([]float32, 60)})
		if err == nil && (out.Rows != 2 || out.Cols != 1 || len(out.Data) != 2) {
			t.Fatalf("output %d×%d with %d values", out.Rows, out.Cols, len(out.Data))
		}
	})
}

// BenchmarkSessionRun is the floor under BenchmarkPredict: the same session
// run on tensors made once, so the difference is Predict's own per-call cost
// (checks, the cache lookup, the copies in and out, the output slice).
func BenchmarkSessionRun(b *testing.B) {
	m := load(b, "mlp", 30, 1, runtime.SessionOptions{}).(*Model)
	for _, n := range []int{1, 8, 64, 128} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			in, err := ort.NewTensor(ort.NewShape(int64(n), 30), make([]float32, n*30))
			if err != nil {
				b.Fatal(err)
			}
			defer in.Destroy()
			out, err := ort.NewTensor(ort.NewShape(int64(n), 1), make([]float32, n))
			if err != nil {
				b.Fatal(err)
			}
			defer out.Destroy()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.sess.Run([]ort.Value{in}, []ort.Value{out}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n)/1000, "µs/row")
		})
	}
}

// TestFeatureNamesReachInfo: a model naming its columns in metadata
// (named.onnx) says so in Info, for the field order check.
func TestFeatureNamesReachInfo(t *testing.T) {
	m := load(t, "named.onnx", 3, 1, runtime.SessionOptions{})
	if got := strings.Join(m.Info().FeatureNames, ","); got != "age,income,tenure" {
		t.Errorf("feature names %q", got)
	}
	if n := load(t, "mlp", 30, 1, runtime.SessionOptions{}).Info().FeatureNames; n != nil {
		t.Errorf("mlp: feature names %v", n)
	}
}
