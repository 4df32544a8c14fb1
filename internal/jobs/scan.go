package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// scanPart is the name of the scan's record among the output's parts
// (not a chunk-NNNNNN part, so OutputWriter and Assemble ignore it).
const scanPart = "scan.json"

// Bounds of the scan's record: the duplicates a runner must know by id
// to keep them out of the output, and the record's bytes.
const (
	MaxCrossDuplicates = 100_000
	maxScanRecordBytes = 64 << 20
)

// scanRecord is what every runner of a job needs from the scan and the
// store does not keep: each chunk's first line (a reader opened at a
// chunk then numbers lines as the scan did) and the rows whose id first
// appeared in an earlier chunk (a reader opened at the chunk cannot know
// them, and they must stay out of the output). It is committed among the
// output's parts before the scan is recorded in the store, so every
// runner that can claim a chunk can read it, wherever it runs.
type scanRecord struct {
	Lines []int64 `json:"lines"`
	// Dups: chunk → the rows of that chunk whose id an earlier chunk holds.
	Dups map[int][]jobio.RowError `json:"dups,omitempty"`
}

// scanResult is one pass over the input.
type scanResult struct {
	rows   int64
	chunks []jobio.Start
	errors int64      // bad rows, duplicates included
	first  []RowError // the first MaxErrorsKept
	rec    scanRecord
	cross  int // rows in rec.Dups
}

// isDup says whether a reader's row error is a duplicate id.
func isDup(e jobio.RowError, idField string) bool { return e.Field == idField && e.ID != "" }

// scanInput reads the input once from the start (streaming, one chunk in
// memory): rows, chunk starts and lines, the first errors, and the
// duplicates across chunks. More than MaxCrossDuplicates of those is an
// error (the job fails: its runners could not keep them out of the
// output in bounded memory).
func scanInput(ctx context.Context, obj jobio.Object, format string, opt jobio.Options) (scanResult, error) {
	opt.Start, opt.Line = jobio.Start{}, 0
	opt.IDsOnly = true // the scan needs ids, not values: a row's values are judged when its chunk runs
	rd, err := jobio.NewReader(obj, format, opt)
	if err != nil {
		return scanResult{}, err
	}
	idField := opt.IDField
	if idField == "" {
		idField = DefaultIDField
	}
	var s scanResult
	for {
		c, err := rd.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return s, err
		}
		s.chunks = append(s.chunks, jobio.Start{Chunk: c.Index, Offset: c.Offset})
		s.rec.Lines = append(s.rec.Lines, c.Line)
		s.rows += int64(len(c.Rows) + len(c.Errors))
		var here map[string]bool // the ids whose first row is in this chunk
		for _, e := range c.Errors {
			s.errors++
			if len(s.first) < MaxErrorsKept {
				s.first = append(s.first, rowError(c.Index, e))
			}
			if !isDup(e, idField) {
				continue
			}
			if here == nil {
				here = make(map[string]bool, len(c.IDs))
				for _, id := range c.IDs {
					here[id] = true
				}
				for _, e2 := range c.Errors {
					if e2.ID != "" && !isDup(e2, idField) {
						here[e2.ID] = true
					}
				}
			}
			if here[e.ID] {
				continue // a reader opened at this chunk sees it too
			}
			if s.cross >= MaxCrossDuplicates {
				return s, fmt.Errorf("more than %d rows repeat an id of an earlier chunk; make the ids unique", MaxCrossDuplicates)
			}
			if s.rec.Dups == nil {
				s.rec.Dups = make(map[int][]jobio.RowError)
			}
			s.rec.Dups[c.Index] = append(s.rec.Dups[c.Index], e)
			s.cross++
		}
	}
	if s.rows == 0 {
		return s, fmt.Errorf("the input has no rows; check the file and its format (%s)", format)
	}
	return s, nil
}

func rowError(chunk int, e jobio.RowError) RowError {
	return RowError{Chunk: chunk, Line: e.Line, ID: e.ID, Field: e.Field, Message: e.Message}
}

// saveScan commits the record among the output's parts.
func saveScan(ctx context.Context, parts jobio.PartStore, rec scanRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return parts.Commit(ctx, scanPart, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// loadScan reads the record; found is false when there is none.
func loadScan(ctx context.Context, parts jobio.PartStore) (rec scanRecord, found bool, err error) {
	rc, err := parts.OpenPart(ctx, scanPart)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxScanRecordBytes+1))
	if err != nil {
		return rec, false, err
	}
	if len(b) > maxScanRecordBytes {
		return rec, false, fmt.Errorf("%s is over %d bytes", scanPart, maxScanRecordBytes)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, false, fmt.Errorf("%s: %v", scanPart, err)
	}
	return rec, true, nil
}
