// Package synthetic is the "synthetic" runtime, for experiments and tests.
//
// A synthetic model stands for a model with a known cost curve: it computes
// nothing of interest, but a batch of n rows costs exactly base + n·perInstance
// of wall time, so batching, queueing and scaling behaviour can be studied
// against a curve that is known in advance. The artifact is cost.json:
//
//	{"base": "1.7ms", "perInstance": "0.32ms", "mode": "spin"}
//
// With the curve above a batch of 1 costs about 2 ms, a batch of 8 about
// 4.3 ms and a batch of 32 about 12 ms.
//
// mode "spin" (the default) burns CPU for that long in a busy loop, like a
// CPU-bound model: once started it runs to completion and ignores
// cancellation. mode "sleep" waits without using CPU, standing for an
// accelerator the host waits on; the wait ends early, returning ctx.Err(),
// when ctx ends.
//
// Optional keys for tests: "panicEvery": N makes every Nth Predict call on a
// loaded model panic (to exercise replica crash recovery) and "failEvery": N
// makes every Nth call return an error. Both count calls per loaded model and
// take effect before any cost is paid. Decoding is strict: unknown keys,
// durations that are not strings ("2ms"), negative or absurd values are
// errors naming the key.
//
// "exitEvery": N (N ≥ 1) kills the process with SIGKILL, as a crash would,
// on every Nth Predict call of the version in this process: the count is
// shared by all loaded models with the same Spec.Name (the version's
// replicas). It lets tests kill a worker process on purpose, so Load refuses
// it unless the process called AllowExit: in the single-process mode the
// process running the model is the gateway itself.
//
// "memory": "64MiB" makes every loaded model (each replica) hold that much
// memory: Load allocates it and writes to every page, so the process's RSS
// grows by that much, and Close gives it back (on unix the memory is an
// anonymous mapping outside the Go heap, unmapped by Close, so RSS drops at
// once without waiting for the garbage collector). Sizes are whole numbers
// with KiB, MiB, GiB, KB, MB or GB, at most MaxMemory. "loadTime": "500ms"
// makes Load take that long (a wait, no CPU), ending early with ctx.Err()
// when ctx ends. Together they let placement and eviction be tested with
// known sizes and load costs.
//
// Inputs may have any width (Info().Inputs is 0) unless the package's schema
// says how many features it produces (Spec.Features), in which case batches
// must have that width. There are Spec.Outputs output columns (at least one);
// output j of a row x of width d is
//
//	sigmoid( Σ_i x_i·(i+1)·(j+1) / d )
//
// with NaN (missing) inputs counted as 0, so results are deterministic
// functions of the row.
package synthetic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluiceml/sluice/internal/bytesize"
	"github.com/sluiceml/sluice/internal/runtime"
)

func init() { runtime.Register("synthetic", Runtime{}) }

// Limits on the artifact's values.
const (
	MaxBase        = 10 * time.Second
	MaxPerInstance = time.Second
	MaxEvery       = 1 << 30
	MaxOutputs     = 1 << 12
	MaxFeatures    = 1 << 20
	MaxMemory      = 64 << 30
	MaxLoadTime    = 10 * time.Minute
)

// Modes.
const (
	ModeSpin  = "spin"
	ModeSleep = "sleep"
)

// Cost is a decoded cost.json.
type Cost struct {
	Base        time.Duration
	PerInstance time.Duration
	Mode        string // ModeSpin or ModeSleep
	PanicEvery  int    // 0: never
	FailEvery   int    // 0: never
	ExitEvery   int    // 0: never; else kill the process on every Nth call of the version
	Memory      int64  // bytes each loaded model holds (0: none)
	LoadTime    time.Duration
}

// For returns what a batch of n rows costs: Base + n·PerInstance.
func (c Cost) For(n int) time.Duration {
	if n < 0 {
		n = 0
	}
	return c.Base + time.Duration(n)*c.PerInstance
}

// knownKeys are cost.json's keys. Matching is exact (encoding/json alone
// would accept "perinstance" for "perInstance").
var knownKeys = []string{"base", "perInstance", "mode", "panicEvery", "failEvery", "exitEvery", "memory", "loadTime"}

// Decode parses and checks a cost.json artifact.
func Decode(data []byte) (Cost, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&raw); err != nil {
		return Cost{}, fmt.Errorf("synthetic: decode cost.json: %v", err)
	}
	if raw == nil {
		return Cost{}, fmt.Errorf("synthetic: cost.json must be a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return Cost{}, fmt.Errorf("synthetic: trailing data after the cost.json object")
	}
	for k := range raw {
		if !slices.Contains(knownKeys, k) {
			return Cost{}, fmt.Errorf("synthetic: unknown key %q in cost.json (known keys: %s)", k, strings.Join(knownKeys, ", "))
		}
	}
	a := struct{ Base, PerInstance, Mode, PanicEvery, FailEvery, ExitEvery, Memory, LoadTime json.RawMessage }{
		raw["base"], raw["perInstance"], raw["mode"], raw["panicEvery"], raw["failEvery"], raw["exitEvery"],
		raw["memory"], raw["loadTime"],
	}
	var c Cost
	var err error
	if c.Base, err = duration("base", a.Base, MaxBase); err != nil {
		return Cost{}, err
	}
	if c.PerInstance, err = duration("perInstance", a.PerInstance, MaxPerInstance); err != nil {
		return Cost{}, err
	}
	c.Mode = ModeSpin
	if !isNull(a.Mode) {
		var m string
		if err := json.Unmarshal(a.Mode, &m); err != nil {
			return Cost{}, fmt.Errorf("synthetic: mode must be a string, \"spin\" or \"sleep\", got %s", a.Mode)
		}
		switch m {
		case ModeSpin, ModeSleep:
			c.Mode = m
		default:
			return Cost{}, fmt.Errorf("synthetic: mode %q is not known (use \"spin\" or \"sleep\")", m)
		}
	}
	if c.PanicEvery, err = every("panicEvery", a.PanicEvery, 0); err != nil {
		return Cost{}, err
	}
	if c.FailEvery, err = every("failEvery", a.FailEvery, 0); err != nil {
		return Cost{}, err
	}
	// exitEvery has no "off" value: leave it out.
	if c.ExitEvery, err = every("exitEvery", a.ExitEvery, 1); err != nil {
		return Cost{}, err
	}
	if c.LoadTime, err = duration("loadTime", a.LoadTime, MaxLoadTime); err != nil {
		return Cost{}, err
	}
	if !isNull(a.Memory) {
		var s string
		if err := json.Unmarshal(a.Memory, &s); err != nil {
			return Cost{}, fmt.Errorf("synthetic: memory must be a size string such as \"64MiB\", got %s", a.Memory)
		}
		n, err := bytesize.Parse(s)
		if err != nil {
			return Cost{}, fmt.Errorf("synthetic: memory: %v", err)
		}
		if n > MaxMemory {
			return Cost{}, fmt.Errorf("synthetic: memory must be at most %s, got %s", bytesize.Format(MaxMemory), s)
		}
		c.Memory = n
	}
	return c, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func duration(key string, raw json.RawMessage, max time.Duration) (time.Duration, error) {
	if isNull(raw) {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("synthetic: %s must be a duration string such as \"1.5ms\", got %s", key, raw)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("synthetic: %s: %q is not a duration (use e.g. \"1.5ms\" or \"300us\")", key, s)
	}
	if d < 0 {
		return 0, fmt.Errorf("synthetic: %s must not be negative, got %s", key, s)
	}
	if d > max {
		return 0, fmt.Errorf("synthetic: %s must be at most %v, got %s", key, max, s)
	}
	return d, nil
}

// every decodes a whole number of calls from least (0: the key may turn it
// off) to MaxEvery.
func every(key string, raw json.RawMessage, least int) (int, error) {
	if isNull(raw) {
		return 0, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Errorf("synthetic: %s must be a whole number of calls, got %s", key, raw)
	}
	if f != math.Trunc(f) {
		return 0, fmt.Errorf("synthetic: %s must be a whole number of calls, got %s", key, raw)
	}
	if least == 0 && f < 0 {
		return 0, fmt.Errorf("synthetic: %s must not be negative (0 turns it off), got %s", key, raw)
	}
	if f < float64(least) {
		return 0, fmt.Errorf("synthetic: %s must be at least %d (leave it out to turn it off), got %s", key, least, raw)
	}
	if f > MaxEvery {
		return 0, fmt.Errorf("synthetic: %s must be at most %d, got %s", key, MaxEvery, raw)
	}
	return int(f), nil
}

// exitAllowed is set by AllowExit.
var exitAllowed atomic.Bool

// AllowExit lets models with exitEvery load in this process. Only a worker
// process (`sluice worker`, started by `sluice serve --workers N`) calls it,
// at start: killing it is a crash its supervisor recovers from, while in
// the single-process mode it would kill the gateway.
func AllowExit() { exitAllowed.Store(true) }

var (
	exitMu    sync.Mutex                   // guards exitCalls
	exitCalls = map[string]*atomic.Int64{} // Predict calls per version name, for exitEvery
)

// exitCounter returns the process-wide call counter of the version name.
func exitCounter(name string) *atomic.Int64 {
	exitMu.Lock()
	defer exitMu.Unlock()
	c, ok := exitCalls[name]
	if !ok {
		c = new(atomic.Int64)
		exitCalls[name] = c
	}
	return c
}

// Runtime loads synthetic artifacts.
type Runtime struct{}

// Load decodes cost.json, waits LoadTime (or until ctx ends) and sizes
// the model from spec.
var _ runtime.MemoryDeclarer = Runtime{}

// DeclaredMemory is what each loaded model of the artifact holds (its
// "memory"; 0 when it declares none or does not decode): runtime.MemoryDeclarer.
func (Runtime) DeclaredMemory(data []byte) int64 {
	c, err := Decode(data)
	if err != nil {
		return 0
	}
	return c.Memory
}

func (Runtime) Load(ctx context.Context, spec runtime.Spec, data []byte) (runtime.Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := Decode(data)
	if err != nil {
		return nil, err
	}
	if c.LoadTime > 0 {
		t := time.NewTimer(c.LoadTime)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("synthetic: %s: load interrupted after less than loadTime %v: %w", spec.Name, c.LoadTime, ctx.Err())
		}
	}
	return New(c, spec)
}

// New returns a model with cost c, shaped by spec.
func New(c Cost, spec runtime.Spec) (*Model, error) {
	if spec.Features < 0 || spec.Features > MaxFeatures {
		return nil, fmt.Errorf("synthetic: %s: features must be between 0 and %d, got %d", spec.Name, MaxFeatures, spec.Features)
	}
	if spec.Outputs < 0 || spec.Outputs > MaxOutputs {
		return nil, fmt.Errorf("synthetic: %s: outputs must be between 0 and %d, got %d", spec.Name, MaxOutputs, spec.Outputs)
	}
	if c.ExitEvery > 0 && !exitAllowed.Load() {
		return nil, fmt.Errorf("synthetic: %s: exitEvery kills the process that runs the model; it is only allowed in a worker process (sluice serve --workers N)", spec.Name)
	}
	outs := spec.Outputs
	if outs < 1 {
		outs = 1
	}
	if c.Memory < 0 || c.Memory > MaxMemory {
		return nil, fmt.Errorf("synthetic: %s: memory must be between 0 and %s, got %d bytes", spec.Name, bytesize.Format(MaxMemory), c.Memory)
	}
	mem, err := allocate(c.Memory)
	if err != nil {
		return nil, fmt.Errorf("synthetic: %s: allocate memory %s: %v", spec.Name, bytesize.Format(c.Memory), err)
	}
	m := &Model{cost: c, inputs: spec.Features, outputs: outs, mem: mem}
	if c.ExitEvery > 0 {
		m.exitCalls = exitCounter(spec.Name)
	}
	return m, nil
}

// touch writes one byte on every page of b, so the pages are resident.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
}

// Model is a loaded synthetic model.
type Model struct {
	cost      Cost
	inputs    int // 0: any width
	outputs   int
	calls     atomic.Int64
	exitCalls *atomic.Int64 // shared by the version's models in this process; nil without exitEvery

	memMu sync.Mutex // guards mem
	mem   []byte     // Cost.Memory bytes, held until Close
}

// MemoryBytes implements runtime.MemoryReporter: the bytes it allocated
// and holds (0 once closed).
func (m *Model) MemoryBytes() int64 {
	m.memMu.Lock()
	defer m.memMu.Unlock()
	return int64(len(m.mem))
}

// Cost returns the model's cost curve.
func (m *Model) Cost() Cost { return m.cost }

// Info reports the model's shape.
func (m *Model) Info() runtime.Info {
	d := fmt.Sprintf("synthetic, %s, base %v + %v per instance, %d outputs",
		m.cost.Mode, m.cost.Base, m.cost.PerInstance, m.outputs)
	if m.cost.Memory > 0 {
		d += ", memory " + bytesize.Format(m.cost.Memory)
	}
	if m.cost.LoadTime > 0 {
		d += fmt.Sprintf(", load %v", m.cost.LoadTime)
	}
	return runtime.Info{Inputs: m.inputs, Outputs: m.outputs, Detail: d}
}

// Predict pays the batch's cost and returns the deterministic outputs.
func (m *Model) Predict(ctx context.Context, in runtime.Batch) (runtime.Output, error) {
	if m.exitCalls != nil {
		if k := m.exitCalls.Add(1); k%int64(m.cost.ExitEvery) == 0 {
			kill()
		}
	}
	n := m.calls.Add(1)
	if e := int64(m.cost.PanicEvery); e > 0 && n%e == 0 {
		panic(fmt.Sprintf("synthetic: planted panic on call %d (panicEvery %d)", n, e))
	}
	if e := int64(m.cost.FailEvery); e > 0 && n%e == 0 {
		return runtime.Output{}, fmt.Errorf("synthetic: planted failure on call %d (failEvery %d)", n, e)
	}
	if in.Rows < 0 || in.Cols < 0 || len(in.Data) != in.Rows*in.Cols {
		return runtime.Output{}, fmt.Errorf("synthetic: malformed batch: %d rows × %d columns but %d values", in.Rows, in.Cols, len(in.Data))
	}
	if m.inputs > 0 && in.Cols != m.inputs {
		return runtime.Output{}, fmt.Errorf("synthetic: batch has %d features per row, model expects %d", in.Cols, m.inputs)
	}
	if err := ctx.Err(); err != nil {
		return runtime.Output{}, err
	}
	if err := pay(ctx, m.cost.Mode, m.cost.For(in.Rows)); err != nil {
		return runtime.Output{}, err
	}
	return Compute(in, m.outputs), nil
}

// pay spends d: burning CPU (spin) or waiting (sleep, which ends early when
// ctx does).
func pay(ctx context.Context, mode string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if mode == ModeSleep {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	end := time.Now().Add(d)
	x := uint64(1)
	for time.Now().Before(end) {
		for i := 0; i < 64; i++ { // a little real work between clock reads
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
	}
	sink.Store(x)
	return nil
}

var sink atomic.Uint64 // keeps the spin loop from being optimized away

// Compute returns the synthetic outputs for a batch: k columns, column j of
// row x being sigmoid(Σ_i x_i·(i+1)·(j+1)/width), NaN inputs counted as 0.
func Compute(in runtime.Batch, k int) runtime.Output {
	out := runtime.Output{Rows: in.Rows, Cols: k, Data: make([]float32, in.Rows*k)}
	for r := 0; r < in.Rows; r++ {
		var s float64 // Σ x_i·(i+1)
		for i, v := range in.Row(r) {
			if v == v { // not NaN
				s += float64(v) * float64(i+1)
			}
		}
		w := float64(in.Cols)
		if w == 0 {
			w = 1
		}
		o := out.Row(r)
		for j := range o {
			z := s * float64(j+1) / w
			o[j] = float32(1 / (1 + math.Exp(-z)))
		}
	}
	return out
}

// Close gives back the model's memory; closing twice is harmless.
func (m *Model) Close() error {
	m.memMu.Lock()
	defer m.memMu.Unlock()
	b := m.mem
	m.mem = nil
	return release(b)
}
