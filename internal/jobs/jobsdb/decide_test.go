package jobsdb

import (
	"fmt"
	"testing"

	"github.com/sluiceml/sluice/internal/jobs"
)

func TestDecideComplete(t *testing.T) {
	r := jobs.ChunkResult{Rows: 7}
	for _, tc := range []struct {
		state, holder, owner string
		claims               int
		want                 completion
		lost                 bool
	}{
		{chunkDone, "a", "a", 1, completion{noop: true}, false},
		{chunkDone, "a", "b", 2, completion{noop: true}, false},
		{chunkPending, "", "a", 0, completion{}, true},
		{chunkLeased, "b", "a", 2, completion{}, true},
		{chunkLeased, "a", "a", 1, completion{}, false},
		{chunkLeased, "a", "a", 3, completion{redone: 7}, false},
	} {
		got, err := decideComplete(tc.state, tc.holder, tc.owner, tc.claims, r)
		if got != tc.want || (err != nil) != tc.lost {
			t.Errorf("%+v: %+v, %v", tc, got, err)
		}
	}
}

func TestMergeErrors(t *testing.T) {
	e := func(chunk int, line int64) jobs.RowError {
		return jobs.RowError{Chunk: chunk, Line: line, Message: fmt.Sprint("bad ", chunk, ":", line)}
	}
	var add []jobs.RowError
	for i := range 100 {
		add = append(add, e(5, int64(100-i))) // a chunk's errors in any order
	}
	got := mergeErrors([]jobs.RowError{e(9, 1)}, add)
	if len(got) != jobs.MaxErrorsKept || got[0] != e(5, 1) || got[len(got)-1] != e(5, jobs.MaxErrorsKept) {
		t.Errorf("merge kept %v", got)
	}
	got = mergeErrors(got, []jobs.RowError{e(1, 1), e(5, 1)})
	if got[0] != e(1, 1) || got[1] != e(5, 1) || got[2] != e(5, 2) || len(got) != jobs.MaxErrorsKept {
		t.Errorf("an earlier chunk's error: %v", got)
	}
	if s := clip("héllo", 2); s != "h…" {
		t.Errorf("clip on a rune boundary: %q", s)
	}
}
