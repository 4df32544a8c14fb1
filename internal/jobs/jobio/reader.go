package jobio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Row is one input row: field name → value (float64, string, bool, or
// what JSON decodes to for nested values); the id field holds the id's
// text (a string) whatever the format.
type Row map[string]any

// RowError is a row the reader could not turn into a Row, or a duplicate
// id. Line is the 1-based line (JSONL, CSV: the data row's line, header =
// line 1) or row number (Parquet, 1-based).
type RowError struct {
	Line    int64  `json:"line"`
	ID      string `json:"id,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (e RowError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("line %d: field %q: %s", e.Line, e.Field, e.Message)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Message)
}

// Chunk is up to ChunkRows consecutive input rows. Every input row is in
// exactly one chunk, either in Rows (with its id at the same index of IDs)
// or in Errors. Offset is where the chunk starts: the byte offset of its
// first line for JSONL and CSV, the row number (0-based) for Parquet; a
// resumed job passes the first uncommitted chunk's Index and Offset in
// Options.Start to read on from there.
type Chunk struct {
	Index  int
	Offset int64
	// Line is the number of the chunk's first line (JSONL, CSV; counted
	// from the resume point after a seek unless Options.Line says where
	// it is) or its first row (Parquet, 1-based).
	Line   int64
	Rows   []Row
	IDs    []string
	Lines  []int64 // each row's line (row number for Parquet), at the same index as Rows
	Errors []RowError
}

// Kind is a CSV field's type.
type Kind int

// The kinds of CSV fields.
const (
	String Kind = iota
	Number
	Bool
)

// Field is one field of the model's input schema, as CSV needs it to type
// its cells.
type Field struct {
	Name string
	Kind Kind
}

// Start is where a resumed read begins: the chunk's index and offset as
// the first read reported them.
type Start struct {
	Chunk  int
	Offset int64
}

// Options configure a reader.
type Options struct {
	ChunkRows    int     // rows per chunk; default 1000
	IDField      string  // the id column; default "id"
	MaxLineBytes int     // JSONL/CSV: a longer line is a row error; default 1 MiB
	MaxIDs       int     // ids remembered to report duplicates; default 1<<20 (see DupCheck)
	Fields       []Field // CSV: the schema's fields and their kinds
	Start        Start   // resume at this chunk (zero: from the beginning)
	// IDsOnly (JSONL): a plain line (a valid JSON object without escapes)
	// is not decoded into a Row, only its id is read (Chunk.Rows holds nil
	// for it): what a scan needs, at a fifth of the cost. Other lines are
	// decoded as always.
	IDsOnly bool
	// Line is the number of the line at Start.Offset (JSONL, CSV), as a
	// scan from the start reported it in Chunk.Line: a reader opened at a
	// resume point then numbers its lines (and its rows' errors) as a
	// read from the start would. 0: unknown, lines count from the resume
	// point.
	Line int64
}

func (o Options) withDefaults() Options {
	if o.ChunkRows <= 0 {
		o.ChunkRows = 1000
	}
	if o.IDField == "" {
		o.IDField = "id"
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = 1 << 20
	}
	if o.MaxIDs <= 0 {
		o.MaxIDs = 1 << 20
	}
	return o
}

// Reader yields an input's chunks in order.
type Reader interface {
	// Next returns the next chunk, or io.EOF after the last.
	Next(ctx context.Context) (Chunk, error)
	// DupCheck says how many ids were checked for duplicates and whether
	// the bound was reached (ids after it are not checked).
	DupCheck() (checked int64, full bool)
}

// Format names an input or output format.
const (
	FormatJSONL   = "jsonl"
	FormatCSV     = "csv"
	FormatParquet = "parquet"
)

// NewReader opens a reader of obj in format. CSV reads and checks its
// header here (a header without the id column or a schema field is an
// error at open); Parquet reads its footer and checks its columns.
func NewReader(obj Object, format string, opt Options) (Reader, error) {
	opt = opt.withDefaults()
	switch format {
	case FormatJSONL:
		return newJSONL(obj, opt)
	case FormatCSV:
		return newCSV(obj, opt)
	case FormatParquet:
		return newParquet(obj, opt)
	default:
		return nil, fmt.Errorf("format %q: unknown; use jsonl, csv or parquet", format)
	}
}

// dupSet remembers the 64-bit hashes of up to max ids, each with the line
// it was first seen on. Beyond max, ids are no longer checked (DupCheck
// reports it): memory stays about 40 bytes an id. Two ids whose hashes
// collide are reported as duplicates (odds ~n²/2⁶⁵: 3e-8 at a million).
type dupSet struct {
	seed    maphash.Seed
	seen    map[uint64]int64
	max     int
	checked int64
	full    bool
}

func newDupSet(max int) *dupSet {
	return &dupSet{seed: maphash.MakeSeed(), seen: make(map[uint64]int64), max: max}
}

// add returns the line id was first seen on, or 0.
func (d *dupSet) add(id string, line int64) int64 {
	h := maphash.String(d.seed, id)
	if first, ok := d.seen[h]; ok {
		return first
	}
	if len(d.seen) >= d.max {
		d.full = true
		return 0
	}
	d.seen[h] = line
	d.checked++
	return 0
}

func idString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, x != ""
	case json.Number:
		return x.String(), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	default:
		return "", false
	}
}

// chunker accumulates rows into chunks and checks ids.
type chunker struct {
	opt  Options
	dups *dupSet
	cur  Chunk
	n    int // rows (good or bad) in cur
}

func (c *chunker) reset(index int, offset int64) {
	c.cur = Chunk{Index: index, Offset: offset}
	c.n = 0
}

func (c *chunker) addRow(line int64, row Row) {
	c.n++
	v, ok := row[c.opt.IDField]
	id, good := idString(v)
	if !ok || !good {
		c.cur.Errors = append(c.cur.Errors, RowError{Line: line, Field: c.opt.IDField,
			Message: "missing or empty id (a string or number); every row needs one"})
		return
	}
	if first := c.dups.add(id, line); first != 0 {
		c.cur.Errors = append(c.cur.Errors, RowError{Line: line, ID: id, Field: c.opt.IDField,
			Message: fmt.Sprintf("duplicate id %q (first on line %d); ids must be unique in the input", id, first)})
		return
	}
	row[c.opt.IDField] = id // one type whatever the format: the id's text
	c.cur.Rows = append(c.cur.Rows, row)
	c.cur.IDs = append(c.cur.IDs, id)
	c.cur.Lines = append(c.cur.Lines, line)
}

// addID adds a row known by its id only (Options.IDsOnly): ok is false
// when the row has no usable id.
func (c *chunker) addID(line int64, id string, ok bool) {
	c.n++
	if !ok {
		c.cur.Errors = append(c.cur.Errors, RowError{Line: line, Field: c.opt.IDField,
			Message: "missing or empty id (a string or number); every row needs one"})
		return
	}
	if first := c.dups.add(id, line); first != 0 {
		c.cur.Errors = append(c.cur.Errors, RowError{Line: line, ID: id, Field: c.opt.IDField,
			Message: fmt.Sprintf("duplicate id %q (first on line %d); ids must be unique in the input", id, first)})
		return
	}
	c.cur.Rows = append(c.cur.Rows, nil)
	c.cur.IDs = append(c.cur.IDs, id)
	c.cur.Lines = append(c.cur.Lines, line)
}

// topLevelID reads the id of a plain JSONL line: a valid JSON object
// with no backslash (so no escaped key or string). plain is false for
// any other line (the caller decodes it). ok is false when the object
// has no id that idString would take (absent, empty, null, a bool, an
// object or an array).
func topLevelID(b []byte, key string) (id string, ok, plain bool) {
	if bytes.IndexByte(b, '\\') >= 0 || !json.Valid(b) {
		return "", false, false
	}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return "", false, false
	}
	depth, wantKey := 0, false
	for i < len(b) {
		switch c := b[i]; c {
		case '{', '[':
			depth++
			wantKey = c == '{' && depth == 1
			i++
		case '}', ']':
			depth--
			i++
		case ',':
			wantKey = depth == 1
			i++
		case '"':
			j := bytes.IndexByte(b[i+1:], '"')
			str := b[i+1 : i+1+j]
			i += j + 2
			if !(depth == 1 && wantKey) {
				continue
			}
			wantKey = false
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return "", false, false
			}
			i = skipSpace(b, i+1)
			if string(str) != key {
				continue
			}
			if b[i] == '"' {
				k := bytes.IndexByte(b[i+1:], '"')
				v := string(b[i+1 : i+1+k])
				return v, v != "", true
			}
			k := i
			for k < len(b) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(b[k])) {
				k++
			}
			v := string(b[i:k])
			if v == "" || v == "null" || v == "true" || v == "false" || v[0] == '{' || v[0] == '[' {
				return "", false, true
			}
			return v, true, true
		default:
			i++
		}
	}
	return "", false, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// addError adds a bad row. A bad row with an id takes the id as a good
// one would: a later row with the same id is its duplicate, so every id
// in the input belongs to one row (kept or failed) and the output holds
// it once.
func (c *chunker) addError(e RowError) {
	c.n++
	if e.ID != "" {
		if first := c.dups.add(e.ID, e.Line); first != 0 {
			e = RowError{Line: e.Line, ID: e.ID, Field: c.opt.IDField,
				Message: fmt.Sprintf("duplicate id %q (first on line %d); ids must be unique in the input", e.ID, first)}
		}
	}
	c.cur.Errors = append(c.cur.Errors, e)
}

// lineReader reads lines bounded in bytes, tracking byte offsets and
// line numbers; an over-long line is skipped to its end and reported.
type lineReader struct {
	br     *bufio.Reader
	offset int64 // byte offset of the next line
	line   int64 // number of the next line (1-based)
	max    int
	buf    []byte
}

// next returns the line without its newline, its start offset and number;
// tooLong when it exceeded max (line content then is nil).
func (l *lineReader) next() (b []byte, off, num int64, tooLong bool, err error) {
	off, num = l.offset, l.line
	l.buf = l.buf[:0]
	for {
		frag, e := l.br.ReadSlice('\n')
		l.offset += int64(len(frag))
		if !tooLong {
			if len(l.buf)+len(frag) > l.max+1 { // +1: the newline
				tooLong = true
				l.buf = l.buf[:0]
			} else {
				l.buf = append(l.buf, frag...)
			}
		}
		if e == bufio.ErrBufferFull {
			continue
		}
		if e == io.EOF {
			if len(frag) == 0 && len(l.buf) == 0 && !tooLong && l.offset == off {
				return nil, off, num, false, io.EOF
			}
		} else if e != nil {
			return nil, off, num, false, e
		}
		l.line++
		if tooLong {
			return nil, off, num, true, nil
		}
		return bytes.TrimRight(l.buf, "\r\n"), off, num, false, nil
	}
}

type jsonlReader struct {
	lr   *lineReader
	ch   chunker
	next int // index of the next chunk
	done bool
}

func newJSONL(obj Object, opt Options) (*jsonlReader, error) {
	var src io.Reader = obj
	line := int64(1)
	if opt.Start.Offset > 0 {
		if opt.Start.Offset > obj.Size() {
			return nil, fmt.Errorf("resume offset %d is past the input's end (%d bytes); the input changed since the job started", opt.Start.Offset, obj.Size())
		}
		src = io.NewSectionReader(obj, opt.Start.Offset, obj.Size()-opt.Start.Offset)
		line = opt.Line // 0 (unknown) after a seek: lines are counted from the resume point
	}
	r := &jsonlReader{
		lr:   &lineReader{br: bufio.NewReaderSize(src, 64<<10), offset: opt.Start.Offset, line: line, max: opt.MaxLineBytes},
		ch:   chunker{opt: opt, dups: newDupSet(opt.MaxIDs)},
		next: opt.Start.Chunk,
	}
	return r, nil
}

func (r *jsonlReader) DupCheck() (int64, bool) { return r.ch.dups.checked, r.ch.dups.full }

func (r *jsonlReader) Next(ctx context.Context) (Chunk, error) {
	if r.done {
		return Chunk{}, io.EOF
	}
	if err := ctx.Err(); err != nil {
		return Chunk{}, err
	}
	r.ch.reset(r.next, r.lr.offset)
	for r.ch.n < r.ch.opt.ChunkRows {
		b, off, num, tooLong, err := r.lr.next()
		if err == io.EOF {
			r.done = true
			break
		}
		if err != nil {
			return Chunk{}, fmt.Errorf("reading line %d (byte %d): %w", num, off, err)
		}
		if r.ch.n == 0 {
			r.ch.cur.Offset, r.ch.cur.Line = off, num
		}
		if tooLong {
			r.ch.addError(RowError{Line: num, Message: fmt.Sprintf("line is longer than %d bytes (byte offset %d); split the row or raise the line bound", r.ch.opt.MaxLineBytes, off)})
			continue
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if r.ch.opt.IDsOnly {
			if id, ok, plain := topLevelID(b, r.ch.opt.IDField); plain {
				r.ch.addID(num, id, ok)
				continue
			}
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var row Row
		if err := dec.Decode(&row); err != nil {
			r.ch.addError(RowError{Line: num, Message: fmt.Sprintf("not a JSON object: %v", err)})
			continue
		}
		if dec.More() {
			r.ch.addError(RowError{Line: num, Message: "more than one JSON value on the line; write one object per line"})
			continue
		}
		for k, v := range row {
			if n, ok := v.(json.Number); ok && k != r.ch.opt.IDField {
				f, err := n.Float64()
				if err != nil {
					r.ch.addError(RowError{Line: num, Field: k, Message: fmt.Sprintf("number %s out of range", n)})
					row = nil
					break
				}
				row[k] = f
			}
		}
		if row == nil {
			continue
		}
		r.ch.addRow(num, row)
	}
	if r.ch.n == 0 {
		r.done = true
		return Chunk{}, io.EOF
	}
	r.next++
	return r.ch.cur, nil
}

type csvReader struct {
	cr     *csv.Reader
	cnt    *countingReader
	header []string
	kinds  []Kind // per header column; -1: not in the schema (ignored)
	idCol  int
	ch     chunker
	next   int
	done   bool
	line   int64 // lines before the section read (0: unknown, after a resume)
	base   int64 // byte offset of the section read
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// boundedReader fails a read when one line runs past max bytes, so the
// CSV reader never buffers an unbounded record.
type boundedReader struct {
	r      io.Reader
	max    int
	inLine int
}

var errLineTooLong = errors.New("line too long")

func (b *boundedReader) Read(p []byte) (int, error) {
	if len(p) > 4096 {
		p = p[:4096]
	}
	n, err := b.r.Read(p)
	for i := 0; i < n; i++ {
		if p[i] == '\n' {
			b.inLine = 0
		} else if b.inLine++; b.inLine > b.max {
			return i, errLineTooLong
		}
	}
	return n, err
}

func newCSV(obj Object, opt Options) (*csvReader, error) {
	// The header, always from the start.
	hr := csv.NewReader(&boundedReader{r: obj, max: opt.MaxLineBytes})
	hr.ReuseRecord = false
	header, err := hr.Read()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("csv input is empty: the first line must be a header naming the schema's fields")
		}
		return nil, fmt.Errorf("csv header (line 1): %v", err)
	}
	headerEnd := hr.InputOffset()
	r := &csvReader{header: header, idCol: -1, ch: chunker{opt: opt, dups: newDupSet(opt.MaxIDs)}, next: opt.Start.Chunk}
	kinds := make(map[string]Kind, len(opt.Fields))
	for _, f := range opt.Fields {
		kinds[f.Name] = f.Kind
	}
	seen := make(map[string]bool, len(header))
	r.kinds = make([]Kind, len(header))
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		header[i] = h
		if seen[h] {
			return nil, fmt.Errorf("csv header (line 1): column %q appears twice; name each column once", h)
		}
		seen[h] = true
		if h == opt.IDField {
			r.idCol = i
			r.kinds[i] = String
			continue
		}
		k, ok := kinds[h]
		if !ok {
			r.kinds[i] = -1
			continue
		}
		r.kinds[i] = k
	}
	if r.idCol < 0 {
		return nil, fmt.Errorf("csv header (line 1) has no id column %q (columns: %s); add it or set idField", opt.IDField, strings.Join(header, ","))
	}
	var missing []string
	for _, f := range opt.Fields {
		if !seen[f.Name] {
			missing = append(missing, f.Name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("csv header (line 1) lacks the schema's fields %s; add those columns", strings.Join(missing, ", "))
	}
	start := headerEnd
	r.line = 1
	if opt.Start.Offset > 0 {
		if opt.Start.Offset < headerEnd || opt.Start.Offset > obj.Size() {
			return nil, fmt.Errorf("resume offset %d is outside the input's rows (%d–%d); the input changed since the job started", opt.Start.Offset, headerEnd, obj.Size())
		}
		start = opt.Start.Offset
		r.line = 0 // unknown after a seek
		if opt.Line > 0 {
			r.line = opt.Line - 1 // FieldPos counts the section's lines from 1
		}
	}
	r.cnt = &countingReader{r: io.NewSectionReader(obj, start, obj.Size()-start)}
	r.cr = csv.NewReader(&boundedReader{r: r.cnt, max: opt.MaxLineBytes})
	r.cr.FieldsPerRecord = len(header)
	r.cr.ReuseRecord = true
	r.ch.cur.Offset = start
	r.base = start
	return r, nil
}

func (r *csvReader) DupCheck() (int64, bool) { return r.ch.dups.checked, r.ch.dups.full }

func (r *csvReader) Next(ctx context.Context) (Chunk, error) {
	if r.done {
		return Chunk{}, io.EOF
	}
	if err := ctx.Err(); err != nil {
		return Chunk{}, err
	}
	r.ch.reset(r.next, r.base+r.cr.InputOffset())
	for r.ch.n < r.ch.opt.ChunkRows {
		off := r.base + r.cr.InputOffset()
		rec, err := r.cr.Read()
		if err == io.EOF {
			r.done = true
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) && pe.Err == csv.ErrFieldCount {
				line, _ := r.cr.FieldPos(0)
				if r.ch.n == 0 {
					r.ch.cur.Offset, r.ch.cur.Line = off, int64(line)+r.line
				}
				r.ch.addError(RowError{Line: int64(line) + r.line, Message: fmt.Sprintf("%d cells where the header has %d", len(rec), len(r.header))})
				continue
			}
			r.done = true
			if errors.Is(err, errLineTooLong) {
				// The CSV reader cannot go on past a cut line.
				return Chunk{}, fmt.Errorf("csv row at byte %d: a line is longer than %d bytes; split the row or raise the line bound", off, r.ch.opt.MaxLineBytes)
			}
			return Chunk{}, fmt.Errorf("csv: %v (line numbers count from %s)", err, r.lineBase())
		}
		pos, _ := r.cr.FieldPos(0)
		line := int64(pos) + r.line
		if r.ch.n == 0 {
			r.ch.cur.Offset, r.ch.cur.Line = off, line
		}
		row := make(Row, len(rec))
		var bad *RowError
		for i, cell := range rec {
			k := r.kinds[i]
			if k < 0 || cell == "" {
				continue
			}
			name := r.header[i]
			switch k {
			case String:
				row[name] = strings.Clone(cell)
			case Number:
				f, err := strconv.ParseFloat(strings.TrimSpace(cell), 64)
				if err != nil {
					bad = &RowError{Line: line, Field: name, Message: fmt.Sprintf("%q is not a number", cell)}
				}
				row[name] = f
			case Bool:
				b, err := strconv.ParseBool(strings.TrimSpace(cell))
				if err != nil {
					bad = &RowError{Line: line, Field: name, Message: fmt.Sprintf("%q is not a bool (true or false)", cell)}
				}
				row[name] = b
			}
			if bad != nil {
				break
			}
		}
		if bad != nil {
			if id := rec[r.idCol]; id != "" {
				bad.ID = strings.Clone(id)
			}
			r.ch.addError(*bad)
			continue
		}
		r.ch.addRow(line, row)
	}
	if r.ch.n == 0 {
		r.done = true
		return Chunk{}, io.EOF
	}
	r.next++
	return r.ch.cur, nil
}

func (r *csvReader) lineBase() string {
	if r.line == 0 {
		return fmt.Sprintf("the resume offset %d", r.base)
	}
	return "the header"
}
