package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// fakePredictor scores a row as {"score": 2x}; a row with x < 0 is
// refused (field x); errs are returned by the next calls, in order;
// block, when set, holds every call until it is closed or ctx ends.
type fakePredictor struct {
	mu       sync.Mutex
	errs     []error
	calls    int
	rows     int
	block    chan struct{}
	free     int // calls that pass before block holds them
	inFlight int
	version  error
	tenants  map[string]bool // nil: every tenant may
}

var testFields = []jobio.Field{{Name: "x", Kind: jobio.Number}}

func (p *fakePredictor) Version(_ context.Context, tenant, model string, version int) (VersionInfo, error) {
	if p.version != nil {
		return VersionInfo{}, p.version
	}
	if p.tenants != nil && !p.tenants[tenant] {
		return VersionInfo{}, errs.New(errs.PermissionDenied, "tenant %q may not call model %q", tenant, model)
	}
	return VersionInfo{VersionID: fmt.Sprintf("%s@%d", model, version), Fields: testFields, Outputs: []string{"score"}}, nil
}

func (p *fakePredictor) Predict(ctx context.Context, tenant, model string, version int, rows []jobio.Row) ([]RowResult, error) {
	p.mu.Lock()
	p.calls++
	block := p.block
	if block != nil && p.free > 0 {
		p.free--
		block = nil
	}
	var err error
	if len(p.errs) > 0 {
		err, p.errs = p.errs[0], p.errs[1:]
	}
	p.inFlight++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
	}()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	out := make([]RowResult, len(rows))
	for i, r := range rows {
		if _, ok := r["id"]; ok {
			return nil, errors.New("the id field reached the predictor")
		}
		x, _ := r["x"].(float64)
		if x < 0 {
			out[i].Err = &jobio.OutError{Field: "x", Message: "must be ≥ 0"}
			continue
		}
		out[i].Outputs = map[string]any{"score": 2 * x}
	}
	p.mu.Lock()
	p.rows += len(rows)
	p.mu.Unlock()
	return out, nil
}

func (p *fakePredictor) setBlock(c chan struct{}) {
	p.mu.Lock()
	p.block = c
	p.mu.Unlock()
}

func (p *fakePredictor) stats() (calls, rows, inFlight int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls, p.rows, p.inFlight
}

// testEnv is a jobs dir, a memory store and a fake predictor.
type testEnv struct {
	dir   string
	store Store      // hooks over the store
	hooks *hookStore // to refuse completions
	mem   *memStore  // the store when it is the memory one
	pred  *fakePredictor
	local *jobio.LocalStore
}

func newEnv(t *testing.T) *testEnv {
	return newEnvWith(t, func(*testing.T) Store { return newMemStore() })
}

func newEnvWith(t *testing.T, newStore StoreMaker) *testEnv {
	t.Helper()
	dir := t.TempDir()
	local, err := jobio.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	base := newStore(t)
	mem, _ := base.(*memStore)
	hooks := &hookStore{Store: base}
	return &testEnv{dir: dir, store: hooks, hooks: hooks, mem: mem, pred: &fakePredictor{}, local: local}
}

// hookStore is a Store whose completions a test may refuse (a store that
// takes no writes while a runner "crashes").
type hookStore struct {
	Store
	mu           sync.Mutex
	completeHook func(chunk int) error
}

func (h *hookStore) setCompleteHook(f func(chunk int) error) {
	h.mu.Lock()
	h.completeHook = f
	h.mu.Unlock()
}

func (h *hookStore) Complete(ctx context.Context, id string, chunk int, owner string, r ChunkResult) error {
	h.mu.Lock()
	f := h.completeHook
	h.mu.Unlock()
	if f != nil {
		if err := f(chunk); err != nil {
			return err
		}
	}
	return h.Store.Complete(ctx, id, chunk, owner, r)
}

func (e *testEnv) config() Config {
	return Config{
		Store: e.store, Predictor: e.pred, JobsDir: e.dir,
		Objects: func(loc jobio.Location) (jobio.ObjectStore, error) {
			if loc.Scheme != "file" {
				return nil, fmt.Errorf("no object store for %s URIs in this test", loc.Scheme)
			}
			return e.local, nil
		},
		Resolve: func(model string) (int, error) {
			if model == "fraud" {
				return 3, nil
			}
			return 0, errs.New(errs.NotFound, "no deployment")
		},
		Runners: 2,
	}
}

func (e *testEnv) write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// jsonlInput is n rows {"id":"r<i>","x":i}.
func jsonlInput(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"id\":\"r%d\",\"x\":%d}\n", i, i)
	}
	return b.String()
}

// readJSONL reads the output's rows by id (failing on an id seen twice).
func readJSONL(t *testing.T, path string) map[string]jobio.OutRow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]jobio.OutRow{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var r jobio.OutRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		if _, dup := out[r.ID]; dup {
			t.Fatalf("id %q is twice in the output", r.ID)
		}
		out[r.ID] = r
	}
	return out
}

func ids(m map[string]jobio.OutRow) string {
	var s []string
	for id := range m {
		s = append(s, id)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

func ptr[T any](v T) *T { return &v }

// order is the output's ids in file order.
func order(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r jobio.OutRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.ID)
	}
	return strings.Join(out, ",")
}
