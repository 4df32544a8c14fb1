package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in         string
		shard, n   int
		wantErrSub string
	}{
		{"0/1", 0, 1, ""},
		{"3/4", 3, 4, ""},
		{"4/4", 0, 0, "0 ≤ I < N"},
		{"-1/2", 0, 0, "I/N"},
		{"1", 0, 0, "I/N"},
		{"a/b", 0, 0, "I/N"},
		{"0/0", 0, 0, "I/N"},
		{"", 0, 0, "JOB_COMPLETION_INDEX"},
	} {
		i, n, err := parseShard(tc.in)
		if tc.wantErrSub == "" {
			if err != nil || i != tc.shard || n != tc.n {
				t.Errorf("parseShard(%q) = %d, %d, %v", tc.in, i, n, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) || !strings.Contains(err.Error(), "--shard") {
			t.Errorf("parseShard(%q): %v, want an error naming --shard and %q", tc.in, err, tc.wantErrSub)
		}
	}
}

func TestCheckRunFlags(t *testing.T) {
	ok := jobRunFlags{shard: "0/2", store: "postgres://u@h/db", lease: 30 * time.Second, inFlight: 2}
	for _, tc := range []struct {
		name   string
		edit   func(*jobRunFlags)
		shards int
		want   string
	}{
		{"postgres", func(*jobRunFlags) {}, 2, ""},
		{"sqlite one shard", func(f *jobRunFlags) { f.store = "" }, 1, ""},
		{"sqlite two shards", func(f *jobRunFlags) { f.store = "" }, 2, "SQLite's jobs.db is a file on one machine"},
		{"not a URL", func(f *jobRunFlags) { f.store = "mysql://x" }, 1, "--store"},
		{"short lease", func(f *jobRunFlags) { f.lease = time.Millisecond }, 2, "--lease"},
		{"in flight", func(f *jobRunFlags) { f.inFlight = 0 }, 2, "--chunks-in-flight"},
	} {
		f := ok
		tc.edit(&f)
		err := checkRunFlags(&f, tc.shards)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if exitCode(&errJobEnded{"x"}) != 3 || exitCode(errTest) != 1 {
		t.Error("exit codes")
	}
}

var errTest = errors.ErrUnsupported

// The Indexed Job of deploy/kubernetes/jobs is a valid batch/v1 Job
// whose N agrees in completions, parallelism and --shard, and whose
// args are flags `sluice job run` takes.
func TestJobRunManifest(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/jobs/job-run.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var j batchv1.Job
	if err := k8syaml.UnmarshalStrict(b, &j); err != nil {
		t.Fatalf("job-run.yaml: %v", err)
	}
	s := j.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion || s.Completions == nil || s.Parallelism == nil {
		t.Fatalf("not an Indexed Job with completions and parallelism: %+v", s)
	}
	n := int(*s.Completions)
	c := s.Template.Spec.Containers[0]
	if *s.Parallelism != *s.Completions || c.Args[0] != "job" || c.Args[1] != "run" || s.Template.Spec.RestartPolicy != "Never" {
		t.Errorf("parallelism %d, completions %d, args %v, restartPolicy %s", *s.Parallelism, n, c.Args, s.Template.Spec.RestartPolicy)
	}
	if want := fmt.Sprintf("--shard=$(JOB_COMPLETION_INDEX)/%d", n); !slices.Contains(c.Args, want) {
		t.Errorf("args %v lack %s", c.Args, want)
	}
	cmd := newJobRunCmd()
	if err := cmd.ParseFlags(c.Args[3:]); err != nil {
		t.Errorf("sluice job run does not take the manifest's flags: %v", err)
	}
	rule := s.PodFailurePolicy.Rules[0]
	if rule.Action != batchv1.PodFailurePolicyActionFailJob || rule.OnExitCodes.Values[0] != exitJobEnded {
		t.Errorf("the first podFailurePolicy rule %+v does not fail the Job on exit %d", rule, exitJobEnded)
	}
}
