package jobio

import (
	"context"
	"fmt"
	"io"
)

// Scan is what one pass over an input learned: its row count, where each
// chunk starts (so a job's shards and a resume can open a reader at any
// chunk), and its bad rows (the first MaxErrors kept, all counted).
type Scan struct {
	Rows      int64
	Chunks    []Start
	Errors    int64      // rows that are errors, duplicates included
	Dups      int64      // duplicate ids
	First     []RowError // the first errors, at most maxErrors
	IDChecked int64      // ids checked for duplicates
	IDsFull   bool       // the duplicate set's bound was reached: ids past it were not checked
}

// ScanInput reads the whole input once, streaming, in the reader's
// chunks: what a submit runs to refuse a bad input before anything is
// queued, and to learn the chunk offsets a sharded or resumed run starts
// from (duplicates across chunks are only seen by a pass from the start,
// so a resumed reader cannot report them; this one can).
func ScanInput(ctx context.Context, obj Object, format string, opt Options, maxErrors int) (Scan, error) {
	opt.Start = Start{}
	r, err := NewReader(obj, format, opt)
	if err != nil {
		return Scan{}, err
	}
	var s Scan
	for {
		c, err := r.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return s, err
		}
		s.Chunks = append(s.Chunks, Start{Chunk: c.Index, Offset: c.Offset})
		s.Rows += int64(len(c.Rows) + len(c.Errors))
		for _, e := range c.Errors {
			s.Errors++
			if e.Field == opt.withDefaults().IDField && e.ID != "" {
				s.Dups++
			}
			if len(s.First) < maxErrors {
				s.First = append(s.First, e)
			}
		}
	}
	s.IDChecked, s.IDsFull = r.DupCheck()
	if s.Rows == 0 {
		return s, fmt.Errorf("the input has no rows; check the file and its format (%s)", format)
	}
	return s, nil
}
