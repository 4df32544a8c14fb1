package jobio

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/parquet-go/parquet-go"
)

type parquetReader struct {
	pf     *parquet.File
	names  []string // leaf column index → field name
	idCol  int
	groups []parquet.RowGroup
	g      int // current row group
	rows   parquet.Rows
	row    int64 // next row number (0-based, in the file)
	buf    []parquet.Row
	ch     chunker
	next   int
	total  int64
}

func newParquet(obj Object, opt Options) (*parquetReader, error) {
	pf, err := parquet.OpenFile(obj, obj.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("not a Parquet file (%v); check the format or the file", err)
	}
	r := &parquetReader{pf: pf, idCol: -1, ch: chunker{opt: opt, dups: newDupSet(opt.MaxIDs)}, next: opt.Start.Chunk}
	for i, path := range pf.Schema().Columns() {
		if len(path) != 1 {
			return nil, fmt.Errorf("parquet column %q is nested; job inputs take flat columns only (one per field)", strings.Join(path, "."))
		}
		r.names = append(r.names, path[0])
		if path[0] == opt.IDField {
			r.idCol = i
		}
	}
	if r.idCol < 0 {
		return nil, fmt.Errorf("parquet input has no id column %q (columns: %s); add it or set idField", opt.IDField, strings.Join(r.names, ","))
	}
	r.groups = pf.RowGroups()
	r.total = pf.NumRows()
	if opt.Start.Offset > 0 {
		if opt.Start.Offset > r.total {
			return nil, fmt.Errorf("resume row %d is past the input's %d rows; the input changed since the job started", opt.Start.Offset, r.total)
		}
		// Find the row group holding the resume row and seek in it.
		var base int64
		for r.g < len(r.groups) && base+r.groups[r.g].NumRows() <= opt.Start.Offset {
			base += r.groups[r.g].NumRows()
			r.g++
		}
		r.row = base
		if r.g < len(r.groups) {
			r.rows = r.groups[r.g].Rows()
			if err := r.rows.SeekToRow(opt.Start.Offset - base); err != nil {
				return nil, fmt.Errorf("parquet: seeking to row %d: %v", opt.Start.Offset, err)
			}
			r.row = opt.Start.Offset
		}
	}
	r.buf = make([]parquet.Row, 256)
	return r, nil
}

func (r *parquetReader) DupCheck() (int64, bool) { return r.ch.dups.checked, r.ch.dups.full }

func parquetValue(v parquet.Value) (any, bool) {
	if v.IsNull() {
		return nil, false
	}
	switch v.Kind() {
	case parquet.Boolean:
		return v.Boolean(), true
	case parquet.Int32:
		return float64(v.Int32()), true
	case parquet.Int64:
		return float64(v.Int64()), true
	case parquet.Float:
		return float64(v.Float()), true
	case parquet.Double:
		return v.Double(), true
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return string(v.ByteArray()), true
	default:
		return nil, false
	}
}

func (r *parquetReader) Next(ctx context.Context) (Chunk, error) {
	if err := ctx.Err(); err != nil {
		return Chunk{}, err
	}
	r.ch.reset(r.next, r.row)
	r.ch.cur.Line = r.row + 1
	for r.ch.n < r.ch.opt.ChunkRows {
		if r.rows == nil {
			if r.g >= len(r.groups) {
				break
			}
			r.rows = r.groups[r.g].Rows()
		}
		want := min(len(r.buf), r.ch.opt.ChunkRows-r.ch.n)
		k, err := r.rows.ReadRows(r.buf[:want])
		for _, pr := range r.buf[:k] {
			r.row++
			row := make(Row, len(r.names))
			for _, v := range pr {
				c := v.Column()
				if c < 0 || c >= len(r.names) {
					continue
				}
				if c == r.idCol && !v.IsNull() {
					// Exact, not through float64.
					switch v.Kind() {
					case parquet.Int64:
						row[r.names[c]] = v.Int64()
						continue
					case parquet.Int32:
						row[r.names[c]] = int64(v.Int32())
						continue
					}
				}
				if x, ok := parquetValue(v); ok {
					row[r.names[c]] = x
				}
			}
			r.ch.addRow(r.row, row)
		}
		if err == io.EOF {
			r.rows.Close()
			r.rows = nil
			r.g++
			continue
		}
		if err != nil {
			return Chunk{}, fmt.Errorf("parquet: reading row %d: %v", r.row+1, err)
		}
	}
	if r.ch.n == 0 {
		return Chunk{}, io.EOF
	}
	r.next++
	return r.ch.cur, nil
}

func outputSchema(outputs []string) *parquet.Schema {
	g := parquet.Group{
		"id":           parquet.String(),
		"versionId":    parquet.String(),
		"errorField":   parquet.Optional(parquet.String()),
		"errorMessage": parquet.Optional(parquet.String()),
	}
	for _, o := range outputs {
		g[o] = parquet.Optional(parquet.Leaf(parquet.DoubleType))
	}
	return parquet.NewSchema("output", g)
}

// writeParquetRows writes rows as one Parquet file (one row group). Each
// output is an optional DOUBLE column: a non-number output is an error.
func writeParquetRows(dst io.Writer, outputs []string, rows []OutRow) error {
	for _, o := range outputs {
		switch o {
		case "id", "versionId", "errorField", "errorMessage":
			return fmt.Errorf("output %q collides with a column of the Parquet output; rename the output", o)
		}
	}
	schema := outputSchema(outputs)
	cols := schema.Columns()
	w := parquet.NewWriter(dst, schema)
	buf := make([]parquet.Row, 0, len(rows))
	for _, r := range rows {
		row := make(parquet.Row, len(cols))
		for i, path := range cols {
			var v parquet.Value
			switch name := path[0]; name {
			case "id":
				v = parquet.ByteArrayValue([]byte(r.ID)).Level(0, 0, i)
			case "versionId":
				v = parquet.ByteArrayValue([]byte(r.VersionID)).Level(0, 0, i)
			case "errorField", "errorMessage":
				if r.Error == nil {
					v = parquet.NullValue().Level(0, 0, i)
				} else {
					s := r.Error.Field
					if name == "errorMessage" {
						s = r.Error.Message
					}
					v = parquet.ByteArrayValue([]byte(s)).Level(0, 1, i)
				}
			default:
				x, ok := r.Outputs[name]
				if !ok || x == nil {
					v = parquet.NullValue().Level(0, 0, i)
					break
				}
				f, isNum := x.(float64)
				if f32, ok := x.(float32); ok {
					f, isNum = float64(f32), true
				}
				if !isNum {
					return fmt.Errorf("row %q: output %q is %T; Parquet output holds numbers, use jsonl for other outputs", r.ID, name, x)
				}
				v = parquet.DoubleValue(f).Level(0, 1, i)
			}
			row[i] = v
		}
		buf = append(buf, row)
	}
	if _, err := w.WriteRows(buf); err != nil {
		return err
	}
	return w.Close()
}

// assembleParquet copies every part's row groups, in chunk order, into
// one Parquet file (each part is one chunk: at most ChunkRows rows in
// memory at a time).
func (w *OutputWriter) assembleParquet(ctx context.Context, n int) error {
	schema := outputSchema(w.outputs)
	return w.parts.Publish(ctx, func(dst io.Writer) error {
		pw := parquet.NewWriter(dst, schema)
		for i := 0; i < n; i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			rc, err := w.parts.OpenPart(ctx, PartName(i, w.format))
			if err != nil {
				return err
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return fmt.Errorf("reading chunk %d: %w", i, err)
			}
			pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				return fmt.Errorf("chunk %d is not a Parquet part: %w", i, err)
			}
			for _, rg := range pf.RowGroups() {
				if _, err := pw.WriteRowGroup(rg); err != nil {
					return fmt.Errorf("copying chunk %d: %w", i, err)
				}
			}
		}
		return pw.Close()
	})
}
