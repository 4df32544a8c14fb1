package main

import (
	"errors"
	"strings"
	"testing"
	"time"
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
