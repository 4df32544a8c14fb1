package jobs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
)

// Every bad submit is a job_invalid naming the field and the fix, and
// queues nothing.
func TestSubmitRefusals(t *testing.T) {
	e := newEnv(t)
	e.write(t, "in.jsonl", jsonlInput(3))
	e.write(t, "in.csv", "id,x\na,1\n")
	e.write(t, "noid.csv", "key,x\na,1\n")
	e.write(t, "nox.csv", "id,y\na,1\n")
	e.write(t, "fake.csv", "PAR1\x00\x00binary")
	e.write(t, "json.csv", `{"id":"a","x":1}`+"\n")
	e.write(t, "csv.jsonl", "id,x\na,1\nb,2\n")
	e.write(t, "noids.jsonl", `{"key":"a","x":1}`+"\n"+`{"key":"b","x":2}`+"\n")
	e.write(t, "empty.jsonl", "")
	e.write(t, "exists.jsonl", "{}\n")
	if err := os.MkdirAll(filepath.Join(e.dir, "old.jsonl.parts"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.write(t, "old.jsonl.parts/chunk-000000.jsonl", "{}\n")
	cfg := e.config()
	m := NewManager(cfg)
	ok := func() Submit {
		return Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}}
	}
	cases := []struct {
		name  string
		edit  func(*Submit)
		field string
		msg   string
	}{
		{"unknown model", func(s *Submit) { s.Model = "nope" }, "model", `model "nope": no deployment`},
		{"missing input", func(s *Submit) { s.Input.URI = "file:none.jsonl" }, "input.uri", "no such file in the jobs dir"},
		{"input outside the jobs dir", func(s *Submit) { s.Input.URI = "file:../x.jsonl" }, "input.uri", `".." is refused`},
		{"s3 without a store", func(s *Submit) { s.Input.URI = "s3://b/in.jsonl" }, "input.uri", "no object store for s3"},
		{"csv without the id column", func(s *Submit) { s.Input.URI = "file:noid.csv" }, "idField", `no id column "id"`},
		{"csv without a schema field", func(s *Submit) { s.Input.URI = "file:nox.csv" }, "input.uri", "lacks the schema's fields x"},
		{"parquet named csv", func(s *Submit) { s.Input.URI = "file:fake.csv" }, "input.format", "is a Parquet file"},
		{"jsonl named csv", func(s *Submit) { s.Input.URI = "file:json.csv" }, "input.format", "set input.format to jsonl"},
		{"csv named jsonl", func(s *Submit) { s.Input.URI = "file:csv.jsonl" }, "input.format", "reads as jsonl"},
		{"jsonl read as parquet", func(s *Submit) { s.Input.Format = "parquet" }, "input.format", "not a Parquet file"},
		{"no row has the id", func(s *Submit) { s.Input.URI = "file:noids.jsonl" }, "idField", `has the id field "id"`},
		{"empty input", func(s *Submit) { s.Input.URI = "file:empty.jsonl" }, "input.uri", "has no rows"},
		{"output exists", func(s *Submit) { s.Output.URI = "file:exists.jsonl" }, "output.uri", "exists; nothing is overwritten"},
		{"output has parts", func(s *Submit) { s.Output.URI = "file:old.jsonl" }, "output.uri", "holds 1 parts of an earlier job"},
		{"bad chunk rows", func(s *Submit) { s.ChunkRows = -1 }, "chunkRows", "must be 1 to"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ok()
			c.edit(&s)
			_, err := m.Submit(context.Background(), "acme", s)
			ee := errs.As(err)
			if ee == nil || ee.Code != errs.JobInvalid || ee.Field != c.field || !strings.Contains(ee.Message, c.msg) {
				t.Fatalf("Submit = %v (code %s, field %q); want job_invalid on %s with %q", err, ee.Code, ee.Field, c.field, c.msg)
			}
		})
	}
	if js, _ := e.store.List(context.Background(), ListOptions{}); len(js) != 0 {
		t.Fatalf("%d jobs queued by refused submits", len(js))
	}
	// The good one passes, and a second job on its output is refused.
	if _, err := m.Submit(context.Background(), "acme", ok()); err != nil {
		t.Fatal(err)
	}
	s := ok()
	s.Input.URI = "file:in.csv"
	if _, err := m.Submit(context.Background(), "acme", s); !strings.Contains(err.Error(), "writes file:out.jsonl") {
		t.Fatalf("a second job on the same output: %v", err)
	}
}

func TestSubmitVersionRefusals(t *testing.T) {
	e := newEnv(t)
	e.write(t, "in.jsonl", jsonlInput(3))
	cfg := e.config()
	m := NewManager(cfg)
	s := Submit{Model: "fraud", Version: 9, Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}}
	e.pred.version = errs.New(errs.NotReady, "fraud@9 is not loaded")
	if _, err := m.Submit(context.Background(), "acme", s); errs.CodeOf(err) != errs.JobInvalid || errs.As(err).Field != "version" {
		t.Errorf("an unloaded version: %v; want job_invalid on version", err)
	}
	e.pred.version = nil
	e.pred.tenants = map[string]bool{"other": true}
	if _, err := m.Submit(context.Background(), "acme", s); errs.CodeOf(err) != errs.PermissionDenied {
		t.Errorf("a tenant not allowed: %v; want permission_denied", err)
	}
	if _, err := NewManager(Config{}).Submit(context.Background(), "acme", s); errs.CodeOf(err) != errs.JobsOff {
		t.Errorf("no store: %v; want jobs_off", err)
	}
}

// A repeat of a submit with its id is that job; another body under the
// id is job_conflict.
func TestSubmitRepeat(t *testing.T) {
	e := newEnv(t)
	e.write(t, "in.jsonl", jsonlInput(3))
	m := NewManager(e.config())
	s := Submit{ID: "nightly-1", Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:out.jsonl"}}
	st, created, err := m.SubmitJob(context.Background(), "acme", s)
	if err != nil || !created || st.ID != "nightly-1" {
		t.Fatalf("first submit: %+v %v %v", st.ID, created, err)
	}
	again, created, err := m.SubmitJob(context.Background(), "acme", s)
	if err != nil || created || again.ID != "nightly-1" {
		t.Fatalf("repeat: %+v %v %v; want the job, not created", again.ID, created, err)
	}
	s.ChunkRows = 10
	if _, _, err := m.SubmitJob(context.Background(), "acme", s); errs.CodeOf(err) != errs.JobConflict {
		t.Fatalf("another body under the id: %v; want job_conflict", err)
	}
	s.ChunkRows = 0
	if _, _, err := m.SubmitJob(context.Background(), "other", s); errs.CodeOf(err) != errs.JobConflict {
		t.Fatalf("another tenant's id: %v; want job_conflict", err)
	}
}

// A tenant sees its own jobs; another's is job_not_found; an admin sees
// all.
func TestTenantScope(t *testing.T) {
	e := newEnv(t)
	e.write(t, "in.jsonl", jsonlInput(3))
	m := NewManager(e.config())
	ctx := context.Background()
	a, err := m.Submit(ctx, "acme", Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:a.jsonl"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Submit(ctx, "beta", Submit{Model: "fraud", Input: IO{URI: "file:in.jsonl"}, Output: IO{URI: "file:b.jsonl"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, "acme", false, b.ID); errs.CodeOf(err) != errs.JobNotFound {
		t.Errorf("acme gets beta's job: %v; want job_not_found", err)
	}
	if _, err := m.Cancel(ctx, "acme", false, b.ID); errs.CodeOf(err) != errs.JobNotFound {
		t.Errorf("acme cancels beta's job: %v; want job_not_found", err)
	}
	if st, err := m.Get(ctx, "root", true, b.ID); err != nil || st.ID != b.ID {
		t.Errorf("admin gets beta's job: %v", err)
	}
	if l, _ := m.List(ctx, "acme", false, ListOptions{}); len(l) != 1 || l[0].ID != a.ID {
		t.Errorf("acme lists %d jobs; want its one", len(l))
	}
	if l, _ := m.List(ctx, "root", true, ListOptions{}); len(l) != 2 {
		t.Errorf("admin lists %d jobs; want 2", len(l))
	}
	if _, err := m.List(ctx, "acme", false, ListOptions{State: "done"}); errs.CodeOf(err) != errs.InvalidArgument {
		t.Errorf("a bad state: %v", err)
	}
	// A queued job is cancelled at once.
	st, err := m.Cancel(ctx, "acme", false, a.ID)
	if err != nil || st.State != Cancelled || st.Incomplete {
		t.Fatalf("cancel of a queued job: %+v, %v; want cancelled, complete", st.State, err)
	}
	if _, err := m.Cancel(ctx, "acme", false, a.ID); errs.CodeOf(err) != errs.JobConflict {
		t.Errorf("cancel of a cancelled job: %v; want job_conflict", err)
	}
	if _, err := m.Get(ctx, "acme", false, "no-such"); errs.CodeOf(err) != errs.JobNotFound {
		t.Errorf("an unknown id: %v", err)
	}
}
