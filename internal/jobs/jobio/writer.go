package jobio

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// OutRow is one output row: the input row's id, the version that scored
// it, and its outputs or its error.
type OutRow struct {
	ID        string         `json:"id"`
	VersionID string         `json:"versionId"`
	Outputs   map[string]any `json:"outputs,omitempty"`
	Error     *OutError      `json:"error,omitempty"`
}

// OutError is a row's error: the field (if one is to blame) and why.
type OutError struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// OutputWriter writes a job's output as committed chunk parts and
// assembles them. Commit of a chunk is exactly once: a chunk already
// committed (by this run or one before a crash) is skipped, so a resumed
// job that redoes a chunk writes it once.
type OutputWriter struct {
	parts   PartStore
	format  string
	outputs []string // CSV/Parquet columns of the outputs, in order
	mu      sync.Mutex
	done    map[int]bool // guarded by mu: the committed chunks
}

// PartName is the name of chunk i's part: chunk-000042.jsonl.
func PartName(i int, format string) string {
	return fmt.Sprintf("chunk-%06d.%s", i, format)
}

func parseIndex(name, format string) (int, bool) {
	s, ok := strings.CutPrefix(name, "chunk-")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "."+format)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0
}

// OpenOutput opens (or resumes) the output whose parts are in parts:
// stale temporaries of a crashed run are removed and the committed chunks
// read. outputs are the model's output names (CSV and Parquet columns).
func OpenOutput(ctx context.Context, parts PartStore, format string, outputs []string) (*OutputWriter, error) {
	switch format {
	case FormatJSONL, FormatCSV, FormatParquet:
	default:
		return nil, fmt.Errorf("output format %q: unknown; use jsonl, csv or parquet", format)
	}
	if err := parts.CleanStale(ctx); err != nil {
		return nil, err
	}
	names, err := parts.Committed(ctx)
	if err != nil {
		return nil, err
	}
	w := &OutputWriter{parts: parts, format: format, outputs: outputs, done: make(map[int]bool, len(names))}
	for _, n := range names {
		if i, ok := parseIndex(n, format); ok {
			w.done[i] = true
		}
	}
	return w, nil
}

// Committed reports whether chunk i is committed.
func (w *OutputWriter) Committed(i int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done[i]
}

// CommittedChunks lists the committed chunks in order.
func (w *OutputWriter) CommittedChunks() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int, 0, len(w.done))
	for i := range w.done {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// WriteChunk writes and commits chunk i's rows; it returns false without
// writing when the chunk is already committed. The commit happens before
// WriteChunk returns: a caller records the chunk done in its store only
// after it. Several chunks may be written at once (a runner's chunks in
// flight); one chunk is written by one caller at a time (its lease).
func (w *OutputWriter) WriteChunk(ctx context.Context, i int, rows []OutRow) (bool, error) {
	if w.Committed(i) {
		return false, nil
	}
	err := w.parts.Commit(ctx, PartName(i, w.format), func(dst io.Writer) error {
		return encodeRows(dst, w.format, w.outputs, rows, false)
	})
	if err != nil {
		return false, fmt.Errorf("committing chunk %d: %w", i, err)
	}
	w.mu.Lock()
	w.done[i] = true
	w.mu.Unlock()
	return true, nil
}

// Assemble writes the final output: the committed parts concatenated in
// chunk order (streamed, one part open at a time), published atomically.
// Running it again writes the same output. It fails when chunks 0..n-1
// are not all committed (n = the input's chunk count).
func (w *OutputWriter) Assemble(ctx context.Context, n int) error {
	for i := 0; i < n; i++ {
		if !w.Committed(i) {
			return fmt.Errorf("chunk %d of %d is not committed; resume the job before assembling", i, n)
		}
	}
	if w.format == FormatParquet {
		return w.assembleParquet(ctx, n)
	}
	return w.parts.Publish(ctx, func(dst io.Writer) error {
		bw := bufio.NewWriterSize(dst, 256<<10)
		if w.format == FormatCSV {
			if err := csvHeader(bw, w.outputs); err != nil {
				return err
			}
		}
		for i := 0; i < n; i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			r, err := w.parts.OpenPart(ctx, PartName(i, w.format))
			if err != nil {
				return err
			}
			_, err = io.Copy(bw, r)
			r.Close()
			if err != nil {
				return fmt.Errorf("copying chunk %d: %w", i, err)
			}
		}
		return bw.Flush()
	})
}

func csvColumns(outputs []string) []string {
	cols := append([]string{"id", "versionId"}, outputs...)
	return append(cols, "errorField", "errorMessage")
}

func csvHeader(dst io.Writer, outputs []string) error {
	cw := csv.NewWriter(dst)
	cw.Write(csvColumns(outputs))
	cw.Flush()
	return cw.Error()
}

func encodeRows(dst io.Writer, format string, outputs []string, rows []OutRow, header bool) error {
	bw := bufio.NewWriter(dst)
	switch format {
	case FormatJSONL:
		enc := json.NewEncoder(bw)
		for i := range rows {
			if err := enc.Encode(&rows[i]); err != nil {
				return fmt.Errorf("row %q: %w", rows[i].ID, err)
			}
		}
	case FormatCSV:
		if header {
			if err := csvHeader(bw, outputs); err != nil {
				return err
			}
		}
		cw := csv.NewWriter(bw)
		rec := make([]string, 0, len(outputs)+4)
		for _, r := range rows {
			rec = append(rec[:0], r.ID, r.VersionID)
			for _, name := range outputs {
				rec = append(rec, cellString(r.Outputs[name]))
			}
			if r.Error != nil {
				rec = append(rec, r.Error.Field, r.Error.Message)
			} else {
				rec = append(rec, "", "")
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
	case FormatParquet:
		if err := writeParquetRows(bw, outputs, rows); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func cellString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case bool:
		return strconv.FormatBool(x)
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}
