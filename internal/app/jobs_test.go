package app

import (
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/jobs/jobio"
	"github.com/sluiceml/sluice/internal/routing"
)

// TestJobObjects: a URI of a scheme the server has no store for is
// refused naming the flags to set; one it has resolves.
func TestJobObjects(t *testing.T) {
	dir := t.TempDir()
	local, err := jobio.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	for _, c := range []struct {
		name string
		b    batchJobs
		uri  string
		want string // "" resolves
	}{
		{"file without --jobs-dir", batchJobs{}, "file:in.jsonl", "--jobs-dir DIR"},
		{"s3 without --artifacts", batchJobs{}, "s3://b/in.jsonl", "--artifacts s3://BUCKET/PREFIX"},
		{"file with --jobs-dir", batchJobs{local: local}, "file:in.jsonl", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			loc, err := jobio.ParseURI(c.uri, dir)
			if err != nil {
				t.Fatal(err)
			}
			st, err := c.b.objects(loc)
			switch {
			case c.want == "" && (err != nil || st == nil):
				t.Fatalf("objects: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.uri)):
				t.Fatalf("objects: %v, want an error naming %q and the URI", err, c.want)
			}
		})
	}
}

// TestJobPrimary: a submit without a version pins the routable version
// with the largest share; a model with none is an error saying why.
func TestJobPrimary(t *testing.T) {
	var h routing.Holder
	h.Store(&routing.Table{Models: map[string]*routing.Entry{
		"fraud": {Routes: []routing.Route{{Range: routing.Range{Version: 2, Lo: 0, Hi: 9000}, Target: &routing.Target{Model: "fraud", N: 2}},
			{Range: routing.Range{Version: 3, Lo: 9000, Hi: routing.Buckets}, Target: &routing.Target{Model: "fraud", N: 3}}}},
		"cold": {NotReady: map[int]string{1: "loading"}},
	}})
	resolve := primary(&h)
	if n, err := resolve("fraud"); n != 2 || err != nil {
		t.Errorf("fraud: %d %v, want 2 (90 %%)", n, err)
	}
	if _, err := resolve("cold"); err == nil || !strings.Contains(err.Error(), "no ready version") {
		t.Errorf("cold: %v", err)
	}
	if _, err := resolve("nope"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("nope: %v", err)
	}
}
