package jobio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func TestParseURI(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		uri, want, bucket, err string
	}{
		{uri: "file:in/rows.jsonl", want: "in/rows.jsonl"},
		{uri: "file:./rows.jsonl", want: "rows.jsonl"},
		{uri: "file://" + dir + "/a/b.csv", want: "a/b.csv"},
		{uri: "file://localhost" + dir + "/b.csv", want: "b.csv"},
		{uri: "file:../etc/passwd", err: `".." is refused`},
		{uri: "file:a/../../x", err: `".." is refused`},
		{uri: "file:a/%2e%2e/%2e%2e/x", err: `".." is refused`},
		{uri: "file:///etc/passwd", err: "outside the jobs dir"},
		{uri: "file://" + dir + "/../x", err: `".." is refused`},
		{uri: "file://" + dir, err: "outside the jobs dir"},
		{uri: "file://evil.example/x", err: "host \"evil.example\" is refused"},
		{uri: "file:", err: "no path"},
		{uri: "s3://bucket/in/rows.parquet", want: "in/rows.parquet", bucket: "bucket"},
		{uri: "s3://bucket/", err: "names a bucket and an object key"},
		{uri: "s3://bucket/a/../b", err: "segment"},
		{uri: "http://x/y", err: "unknown scheme"},
	}
	for _, c := range cases {
		t.Run(c.uri, func(t *testing.T) {
			loc, err := ParseURI(c.uri, dir)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.uri) {
					t.Fatalf("ParseURI(%q) = %+v, %v; want an error naming the URI with %q", c.uri, loc, err, c.err)
				}
				return
			}
			if err != nil || loc.Path != c.want || loc.Bucket != c.bucket {
				t.Fatalf("ParseURI(%q) = %+v, %v; want path %q bucket %q", c.uri, loc, err, c.want, c.bucket)
			}
		})
	}
}

func TestLocalStoreRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o600)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ok.jsonl"), []byte("{}\n"), 0o600)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "in.jsonl"), []byte("{}\n"), 0o600)
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "abs-link")))
	must(t, os.Symlink("../"+filepath.Base(outside)+"/secret", filepath.Join(dir, "rel-link")))
	must(t, os.Symlink(outside, filepath.Join(dir, "dir-link")))
	must(t, os.Symlink("sub/in.jsonl", filepath.Join(dir, "inside-link")))
	s, err := OpenLocal(dir)
	must(t, err)
	defer s.Close()
	ctx := context.Background()
	for _, c := range []struct{ key, err string }{
		{"ok.jsonl", ""},
		{"inside-link", ""},
		{"abs-link", "leads out of the jobs dir"},
		{"rel-link", "leads out of the jobs dir"},
		{"dir-link/secret", "leads out of the jobs dir"},
		{"missing.jsonl", "no such file"},
		{"sub", "not a regular file"},
	} {
		o, err := s.Open(ctx, c.key)
		if c.err == "" {
			if err != nil {
				t.Errorf("Open(%q): %v", c.key, err)
			} else {
				o.Close()
			}
			continue
		}
		if err == nil {
			o.Close()
			t.Errorf("Open(%q) succeeded; want %q", c.key, c.err)
		} else if !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "file:"+c.key) {
			t.Errorf("Open(%q) = %v; want an error naming file:%s with %q", c.key, err, c.key, c.err)
		}
	}
	// Output parts cannot be made through a link out either.
	if _, err := s.Parts(ctx, "dir-link/out.jsonl"); err == nil {
		t.Errorf("Parts through a symlink out of the jobs dir succeeded")
	}
	if _, err := OpenLocal(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "--jobs-dir") {
		t.Errorf("OpenLocal(missing) = %v; want an error naming --jobs-dir", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// memObject is an Object over bytes.
type memObject struct{ *bytes.Reader }

func (memObject) Close() error { return nil }

func obj(s string) Object { return memObject{bytes.NewReader([]byte(s))} }

func readAll(t *testing.T, r Reader) []Chunk {
	t.Helper()
	var out []Chunk
	for {
		c, err := r.Next(context.Background())
		if err == io.EOF {
			return out
		}
		must(t, err)
		out = append(out, c)
	}
}

func TestJSONL(t *testing.T) {
	in := `{"id":"a","x":1}
{"id":2,"x":2.5}

{"id":"c","x":3}
not json
{"id":"a","x":4}
{"x":5}
{"id":"` + strings.Repeat("z", 100) + `"}
{"id":"e","x":6}
`
	r, err := NewReader(obj(in), FormatJSONL, Options{ChunkRows: 3, MaxLineBytes: 64})
	must(t, err)
	chunks := readAll(t, r)
	var ids []string
	var errsSeen []string
	for _, c := range chunks {
		ids = append(ids, c.IDs...)
		for _, e := range c.Errors {
			errsSeen = append(errsSeen, e.Error())
		}
	}
	if got := strings.Join(ids, ","); got != "a,2,c,e" {
		t.Errorf("ids %s", got)
	}
	want := []string{"line 5: not a JSON object", `line 6: field "id": duplicate id "a" (first on line 1)`, `line 7: field "id": missing or empty id`, "line 8: line is longer than 64 bytes"}
	if len(errsSeen) != len(want) {
		t.Fatalf("errors %q; want %q", errsSeen, want)
	}
	for i := range want {
		if !strings.HasPrefix(errsSeen[i], want[i]) {
			t.Errorf("error %d = %q; want prefix %q", i, errsSeen[i], want[i])
		}
	}
	if chunks[0].Rows[1]["x"] != 2.5 {
		t.Errorf("x = %#v", chunks[0].Rows[1]["x"])
	}
	// Resume at chunk 1's offset: the same chunks from there on.
	r2, err := NewReader(obj(in), FormatJSONL, Options{ChunkRows: 3, MaxLineBytes: 64, Start: Start{Chunk: 1, Offset: chunks[1].Offset}})
	must(t, err)
	again := readAll(t, r2)
	if len(again) != len(chunks)-1 || again[0].Index != 1 || strings.Join(again[len(again)-1].IDs, ",") != strings.Join(chunks[len(chunks)-1].IDs, ",") {
		t.Errorf("resumed chunks %+v; want %+v", again, chunks[1:])
	}
}

func TestCSV(t *testing.T) {
	fields := []Field{{"amount", Number}, {"country", String}, {"card_present", Bool}}
	in := "id,amount,country,card_present,extra\n" +
		"r1,12.5,DE,true,x\n" +
		"r2,abc,FR,false,x\n" +
		"r3,1,\"A, B\",false,x\n" +
		"r1,2,US,true,x\n" +
		"r4,3,US\n" +
		"r5,,US,maybe,x\n"
	r, err := NewReader(obj(in), FormatCSV, Options{ChunkRows: 2, Fields: fields})
	must(t, err)
	chunks := readAll(t, r)
	var ids, es []string
	for _, c := range chunks {
		ids = append(ids, c.IDs...)
		for _, e := range c.Errors {
			es = append(es, e.Error())
		}
	}
	if got := strings.Join(ids, ","); got != "r1,r3" {
		t.Errorf("ids %s", got)
	}
	want := []string{`line 3: field "amount": "abc" is not a number`, `line 5: field "id": duplicate id "r1" (first on line 2)`, "line 6: 3 cells where the header has 5", `line 7: field "card_present": "maybe" is not a bool`}
	if len(es) != len(want) {
		t.Fatalf("errors %q; want %q", es, want)
	}
	for i := range want {
		if !strings.HasPrefix(es[i], want[i]) {
			t.Errorf("error %d = %q; want %q", i, es[i], want[i])
		}
	}
	row := chunks[0].Rows[0]
	if row["amount"] != 12.5 || row["country"] != "DE" || row["card_present"] != true || row["extra"] != nil {
		t.Errorf("row %#v", row)
	}
	if chunks[1].Rows[0]["country"] != "A, B" {
		t.Errorf("quoted cell %#v", chunks[1].Rows[0])
	}
	// Resume at chunk 2.
	r2, err := NewReader(obj(in), FormatCSV, Options{ChunkRows: 2, Fields: fields, Start: Start{Chunk: 2, Offset: chunks[2].Offset}})
	must(t, err)
	again := readAll(t, r2)
	if len(again) != 1 || again[0].Index != 2 || len(again[0].Errors) != 2 {
		t.Errorf("resumed %+v", again)
	}

	for _, c := range []struct{ in, err string }{
		{"amount,country,card_present\n1,DE,true\n", `no id column "id"`},
		{"id,amount\n1,2\n", "lacks the schema's fields card_present, country"},
		{"", "empty"},
		{"id,id,amount,country,card_present\n", "appears twice"},
	} {
		if _, err := NewReader(obj(c.in), FormatCSV, Options{Fields: fields}); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("open %q: %v; want %q", c.in, err, c.err)
		}
	}
}

func writeParquetInput(t *testing.T, n, group int) []byte {
	t.Helper()
	schema := parquet.NewSchema("in", parquet.Group{
		"id": parquet.String(), "amount": parquet.Leaf(parquet.DoubleType), "n": parquet.Leaf(parquet.Int64Type), "ok": parquet.Leaf(parquet.BooleanType),
	})
	var b bytes.Buffer
	w := parquet.NewWriter(&b, schema)
	cols := schema.Columns()
	for i := 0; i < n; i++ {
		row := make(parquet.Row, len(cols))
		for c, p := range cols {
			switch p[0] {
			case "id":
				id := fmt.Sprintf("p%d", i)
				if i == n-1 {
					id = "p0" // a duplicate
				}
				row[c] = parquet.ByteArrayValue([]byte(id)).Level(0, 0, c)
			case "amount":
				row[c] = parquet.DoubleValue(float64(i)/2).Level(0, 0, c)
			case "n":
				row[c] = parquet.Int64Value(int64(i)).Level(0, 0, c)
			case "ok":
				row[c] = parquet.BooleanValue(i%2 == 0).Level(0, 0, c)
			}
		}
		if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
			t.Fatal(err)
		}
		if (i+1)%group == 0 {
			must(t, w.Flush())
		}
	}
	must(t, w.Close())
	return b.Bytes()
}

func TestParquet(t *testing.T) {
	data := writeParquetInput(t, 25, 7)
	r, err := NewReader(memObject{bytes.NewReader(data)}, FormatParquet, Options{ChunkRows: 10})
	must(t, err)
	chunks := readAll(t, r)
	if len(chunks) != 3 || len(chunks[0].Rows) != 10 || chunks[1].Offset != 10 || len(chunks[2].Rows) != 4 || len(chunks[2].Errors) != 1 {
		t.Fatalf("chunks %+v", chunks)
	}
	if e := chunks[2].Errors[0]; e.Line != 25 || !strings.Contains(e.Message, `duplicate id "p0"`) {
		t.Errorf("duplicate %+v", e)
	}
	row := chunks[0].Rows[3]
	if row["id"] != "p3" || row["amount"] != 1.5 || row["n"] != 3.0 || row["ok"] != false {
		t.Errorf("row %#v", row)
	}
	r2, err := NewReader(memObject{bytes.NewReader(data)}, FormatParquet, Options{ChunkRows: 10, Start: Start{Chunk: 1, Offset: 10}})
	must(t, err)
	again := readAll(t, r2)
	if len(again) != 2 || again[0].IDs[0] != "p10" || again[0].Index != 1 {
		t.Errorf("resumed %+v", again)
	}
	if _, err := NewReader(memObject{bytes.NewReader(data)}, FormatParquet, Options{IDField: "key"}); err == nil || !strings.Contains(err.Error(), `no id column "key"`) {
		t.Errorf("missing id column: %v", err)
	}
	if _, err := NewReader(obj("{\"id\":1}\n"), FormatParquet, Options{}); err == nil || !strings.Contains(err.Error(), "not a Parquet file") {
		t.Errorf("jsonl as parquet: %v", err)
	}
}

func heapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// pipeObject streams from a pipe: ReadAt is never needed by JSONL from the
// start.
type pipeObject struct {
	io.Reader
	size int64
}

func (pipeObject) ReadAt([]byte, int64) (int, error) { return 0, errors.New("no ReadAt") }
func (pipeObject) Close() error                      { return nil }
func (p pipeObject) Size() int64                     { return p.size }

func TestJSONLBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 200 MiB")
	}
	const total = 200 << 20
	pr, pw := io.Pipe()
	go func() {
		// Lines built by appends into one buffer, written 1 MiB at a time.
		pad := strings.Repeat("x", 150)
		buf := make([]byte, 0, 1<<20+512)
		for i, n := 0, 0; n < total; i++ {
			buf = append(buf, `{"id":"r`...)
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, `","amount":`...)
			buf = strconv.AppendInt(buf, int64(i%1000), 10)
			buf = append(buf, `,"note":"`...)
			buf = append(buf, pad...)
			buf = append(buf, "\"}\n"...)
			if len(buf) >= 1<<20 {
				n += len(buf)
				if _, err := pw.Write(buf); err != nil {
					return
				}
				buf = buf[:0]
			}
		}
		pw.Write(buf)
		pw.Close()
	}()
	defer pr.Close()
	runtime.GC()
	base := heapInUse()
	r, err := NewReader(pipeObject{pr, total}, FormatJSONL, Options{ChunkRows: 1000, MaxIDs: 100_000})
	must(t, err)
	var rows, peak uint64
	for {
		c, err := r.Next(context.Background())
		if err == io.EOF {
			break
		}
		must(t, err)
		rows += uint64(len(c.Rows))
		if c.Index%100 == 0 {
			if h := heapInUse(); h > peak {
				peak = h
			}
		}
	}
	checked, full := r.DupCheck()
	t.Logf("rows %d, heap in use base %d MiB, peak %d MiB, ids checked %d (bound reached %v)", rows, base>>20, peak>>20, checked, full)
	if rows < 1_000_000 || !full || checked != 100_000 {
		t.Fatalf("rows %d checked %d full %v", rows, checked, full)
	}
	if peak > base+64<<20 {
		t.Fatalf("heap in use reached %d MiB above the start streaming 200 MiB; want ≤ 64 MiB", (peak-base)>>20)
	}
}

func TestWriterCrashResumeAssemble(t *testing.T) {
	for _, format := range []string{FormatJSONL, FormatCSV, FormatParquet} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenLocal(dir)
			must(t, err)
			defer s.Close()
			ctx := context.Background()
			key := "out/result." + format
			must(t, os.MkdirAll(filepath.Join(dir, "out"), 0o755))
			chunk := func(i int) []OutRow {
				var rows []OutRow
				for j := 0; j < 4; j++ {
					id := fmt.Sprintf("c%d-%d", i, j)
					if j == 3 {
						rows = append(rows, OutRow{ID: id, VersionID: "v1", Error: &OutError{Field: "amount", Message: "not a number"}})
					} else {
						rows = append(rows, OutRow{ID: id, VersionID: "v1", Outputs: map[string]any{"score": float64(i*10 + j)}})
					}
				}
				return rows
			}
			parts, err := s.Parts(ctx, key)
			must(t, err)
			w, err := OpenOutput(ctx, parts, format, []string{"score"})
			must(t, err)
			for i := 0; i < 5; i++ {
				ok, err := w.WriteChunk(ctx, i, chunk(i))
				must(t, err)
				if !ok {
					t.Fatalf("chunk %d not written", i)
				}
			}
			// The crash: chunk 5's part written but not renamed.
			tmp := filepath.Join(dir, key+".parts", PartName(5, format)+".tmp")
			must(t, os.WriteFile(tmp, []byte("half a chu"), 0o644))

			// Resume: a new writer over the same parts.
			parts2, err := s.Parts(ctx, key)
			must(t, err)
			w2, err := OpenOutput(ctx, parts2, format, []string{"score"})
			must(t, err)
			if _, err := os.Stat(tmp); !os.IsNotExist(err) {
				t.Fatalf("stale tmp kept: %v", err)
			}
			if got := fmt.Sprint(w2.CommittedChunks()); got != "[0 1 2 3 4]" {
				t.Fatalf("committed %s", got)
			}
			if err := w2.Assemble(ctx, 7); err == nil || !strings.Contains(err.Error(), "chunk 5 of 7 is not committed") {
				t.Fatalf("early Assemble: %v", err)
			}
			// The runner redoes from chunk 4 (its completion not yet
			// recorded): chunk 4 is skipped, 5 and 6 written.
			for i := 4; i < 7; i++ {
				ok, err := w2.WriteChunk(ctx, i, chunk(i))
				must(t, err)
				if ok != (i != 4) {
					t.Fatalf("chunk %d written=%v", i, ok)
				}
			}
			must(t, w2.Assemble(ctx, 7))
			first := readOutput(t, filepath.Join(dir, key), format)
			must(t, w2.Assemble(ctx, 7)) // idempotent
			if again := readOutput(t, filepath.Join(dir, key), format); strings.Join(again, ";") != strings.Join(first, ";") {
				t.Fatalf("second Assemble differs")
			}
			seen := map[string]int{}
			for _, id := range first {
				seen[id]++
			}
			if len(first) != 28 || len(seen) != 28 {
				t.Fatalf("output ids %v", first)
			}
			for i := 0; i < 7; i++ {
				for j := 0; j < 4; j++ {
					if id := fmt.Sprintf("c%d-%d", i, j); seen[id] != 1 {
						t.Errorf("id %s appears %d times", id, seen[id])
					}
				}
			}
			must(t, parts2.RemoveAll(ctx))
			if _, err := os.Stat(filepath.Join(dir, key+".parts")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("parts left after RemoveAll: %v", err)
			}
			if again := readOutput(t, filepath.Join(dir, key), format); len(again) != 28 {
				t.Errorf("the output went with its parts")
			}
		})
	}
}

// readOutput returns the ids of an assembled output, in order, checking
// each row's shape.
func readOutput(t *testing.T, path, format string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	var ids []string
	switch format {
	case FormatJSONL:
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var r OutRow
			must(t, json.Unmarshal([]byte(line), &r))
			if r.VersionID != "v1" || (r.Error == nil) == (r.Outputs == nil) {
				t.Fatalf("row %s", line)
			}
			ids = append(ids, r.ID)
		}
	case FormatCSV:
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if lines[0] != "id,versionId,score,errorField,errorMessage" {
			t.Fatalf("header %q", lines[0])
		}
		for _, l := range lines[1:] {
			ids = append(ids, strings.Split(l, ",")[0])
		}
	case FormatParquet:
		r, err := NewReader(memObject{bytes.NewReader(b)}, FormatParquet, Options{ChunkRows: 5})
		must(t, err)
		for _, c := range readAll(t, r) {
			if len(c.Errors) > 0 {
				t.Fatalf("errors %v", c.Errors)
			}
			for k, row := range c.Rows {
				if row["versionId"] != "v1" || (row["score"] == nil) == (row["errorMessage"] == nil) {
					t.Fatalf("row %s: %#v", c.IDs[k], row)
				}
			}
			ids = append(ids, c.IDs...)
		}
	}
	return ids
}

func TestScanInput(t *testing.T) {
	in := "{\"id\":\"a\"}\n{\"id\":\"b\"}\n{\"id\":\"a\"}\nnope\n{\"id\":\"c\"}\n"
	s, err := ScanInput(context.Background(), obj(in), FormatJSONL, Options{ChunkRows: 2}, 1)
	must(t, err)
	if s.Rows != 5 || len(s.Chunks) != 3 || s.Errors != 2 || s.Dups != 1 || len(s.First) != 1 || s.IDChecked != 3 || s.IDsFull {
		t.Fatalf("scan %+v", s)
	}
	if s.Chunks[2].Offset != int64(strings.Index(in, "{\"id\":\"c\"}")) {
		t.Errorf("chunk 2 offset %d", s.Chunks[2].Offset)
	}
	// Every chunk's Start opens a reader that yields that chunk.
	for _, st := range s.Chunks {
		r, err := NewReader(obj(in), FormatJSONL, Options{ChunkRows: 2, Start: st})
		must(t, err)
		c, err := r.Next(context.Background())
		must(t, err)
		if c.Index != st.Chunk || c.Offset != st.Offset {
			t.Errorf("chunk at %+v read as %d@%d", st, c.Index, c.Offset)
		}
	}
	if _, err := ScanInput(context.Background(), obj("\n\n"), FormatJSONL, Options{}, 1); err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Errorf("empty input: %v", err)
	}
	// A duplicate bound of 2: the third id is not checked.
	s, err = ScanInput(context.Background(), obj(in), FormatJSONL, Options{MaxIDs: 2}, 10)
	must(t, err)
	if s.IDChecked != 2 || !s.IDsFull {
		t.Errorf("bounded scan %+v", s)
	}
}

// An int64 id column keeps its exact text (not rounded through float64),
// and JSONL number ids keep theirs.
func TestNumericIDs(t *testing.T) {
	schema := parquet.NewSchema("in", parquet.Group{"id": parquet.Leaf(parquet.Int64Type), "x": parquet.Leaf(parquet.DoubleType)})
	var b bytes.Buffer
	w := parquet.NewWriter(&b, schema)
	cols := schema.Columns()
	row := make(parquet.Row, 2)
	for c, p := range cols {
		if p[0] == "id" {
			row[c] = parquet.Int64Value(9007199254740993).Level(0, 0, c)
		} else {
			row[c] = parquet.DoubleValue(1).Level(0, 0, c)
		}
	}
	_, err := w.WriteRows([]parquet.Row{row})
	must(t, err)
	must(t, w.Close())
	r, err := NewReader(memObject{bytes.NewReader(b.Bytes())}, FormatParquet, Options{})
	must(t, err)
	c := readAll(t, r)
	if len(c) != 1 || c[0].IDs[0] != "9007199254740993" || c[0].Rows[0]["id"] != "9007199254740993" {
		t.Fatalf("parquet int64 id: %+v", c)
	}
	r, err = NewReader(obj("{\"id\":9007199254740993,\"x\":1}\n"), FormatJSONL, Options{})
	must(t, err)
	c = readAll(t, r)
	if len(c) != 1 || c[0].IDs[0] != "9007199254740993" || c[0].Rows[0]["id"] != "9007199254740993" {
		t.Fatalf("jsonl number id: %+v", c)
	}
}

// synthCSV is a CSV Object of n fixed-width rows computed at any offset:
// a large input without a file or a buffer of it.
type synthCSV struct {
	n   int64
	off int64
}

const synthHeader = "id,amount,note\n"

func synthLine(i int64) string {
	return fmt.Sprintf("r%011d,%011d,%s\n", i, i%1000, strings.Repeat("n", 100))
}

var synthLen = int64(len(synthLine(0)))

func (s *synthCSV) Size() int64  { return int64(len(synthHeader)) + s.n*synthLen }
func (s *synthCSV) Close() error { return nil }
func (s *synthCSV) Read(p []byte) (int, error) {
	n, err := s.ReadAt(p, s.off)
	s.off += int64(n)
	return n, err
}

func (s *synthCSV) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		if off >= s.Size() {
			return n, io.EOF
		}
		var src string
		var base int64
		if off < int64(len(synthHeader)) {
			src = synthHeader
		} else {
			i := (off - int64(len(synthHeader))) / synthLen
			src, base = synthLine(i), int64(len(synthHeader))+i*synthLen
		}
		k := copy(p[n:], src[off-base:])
		n += k
		off += int64(k)
	}
	return n, nil
}

func TestCSVBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 100 MiB")
	}
	src := &synthCSV{n: (100 << 20) / synthLen}
	runtime.GC()
	base := heapInUse()
	r, err := NewReader(src, FormatCSV, Options{Fields: []Field{{"amount", Number}, {"note", String}}, MaxIDs: 50_000})
	must(t, err)
	var rows int64
	var peak uint64
	for {
		c, err := r.Next(context.Background())
		if err == io.EOF {
			break
		}
		must(t, err)
		if len(c.Errors) > 0 {
			t.Fatalf("errors %v", c.Errors[:1])
		}
		rows += int64(len(c.Rows))
		if c.Index%100 == 0 {
			peak = max(peak, heapInUse())
		}
	}
	t.Logf("rows %d, heap in use base %d MiB, peak %d MiB", rows, base>>20, peak>>20)
	if rows != src.n {
		t.Fatalf("rows %d of %d", rows, src.n)
	}
	if peak > base+64<<20 {
		t.Fatalf("heap in use reached %d MiB above the start streaming 100 MiB of CSV; want ≤ 64 MiB", (peak-base)>>20)
	}
}

// A reader opened at a chunk with the line the scan reported numbers its
// rows' errors as a read from the start does (JSONL and CSV).
func TestResumeLines(t *testing.T) {
	cases := []struct {
		format, in string
		fields     []Field
	}{
		{FormatJSONL, "{\"id\":\"a\",\"x\":1}\n\n{\"id\":\"b\",\"x\":2}\nnot json\n{\"id\":\"c\",\"x\":3}\n\n{\"id\":\"d\"}\n{oops\n", nil},
		{FormatCSV, "id,x\na,1\nb,2\nc,zz\nd,4\ne,5\nf,no\n", []Field{{Name: "x", Kind: Number}}},
	}
	for _, c := range cases {
		t.Run(c.format, func(t *testing.T) {
			opt := Options{ChunkRows: 2, Fields: c.fields}
			r, err := NewReader(obj(c.in), c.format, opt)
			must(t, err)
			all := readAll(t, r)
			for _, ch := range all[1:] {
				o := opt
				o.Start, o.Line = Start{Chunk: ch.Index, Offset: ch.Offset}, ch.Line
				r2, err := NewReader(obj(c.in), c.format, o)
				must(t, err)
				got, err := r2.Next(context.Background())
				must(t, err)
				if got.Line != ch.Line || fmt.Sprint(got.Errors) != fmt.Sprint(ch.Errors) || fmt.Sprint(got.Lines) != fmt.Sprint(ch.Lines) || len(got.Lines) != len(got.Rows) {
					t.Errorf("chunk %d resumed: line %d errors %v; from the start: line %d errors %v", ch.Index, got.Line, got.Errors, ch.Line, ch.Errors)
				}
			}
		})
	}
}

// A bad row's id is taken: a later row with that id is a duplicate, so an
// id belongs to one row.
func TestBadRowTakesItsID(t *testing.T) {
	in := "id,x\na,zz\na,1\nb,2\n"
	r, err := NewReader(obj(in), FormatCSV, Options{Fields: []Field{{Name: "x", Kind: Number}}})
	must(t, err)
	ch := readAll(t, r)[0]
	if len(ch.Rows) != 1 || ch.IDs[0] != "b" || len(ch.Errors) != 2 || !strings.Contains(ch.Errors[1].Message, `duplicate id "a" (first on line 2)`) {
		t.Fatalf("rows %v errors %v; want b kept, a's bad row and its duplicate failed", ch.IDs, ch.Errors)
	}
}

// Writers of one part at once (a runner whose lease was lost and the one
// that took the chunk) leave one whole part.
func TestConcurrentCommitsOfOnePart(t *testing.T) {
	dir := t.TempDir()
	ls, err := OpenLocal(dir)
	must(t, err)
	defer ls.Close()
	parts, err := ls.Parts(context.Background(), "out.jsonl")
	must(t, err)
	var wg sync.WaitGroup
	want := map[string]bool{}
	for w := range 8 {
		var rows []OutRow
		for i := range 2000 {
			rows = append(rows, OutRow{ID: fmt.Sprintf("w%d-%d", w, i), VersionID: "m@1"})
		}
		var buf bytes.Buffer
		must(t, encodeRows(&buf, FormatJSONL, nil, rows, false))
		want[buf.String()] = true
		wg.Go(func() {
			ow, err := OpenOutput(context.Background(), parts, FormatJSONL, nil)
			if err == nil {
				_, err = ow.WriteChunk(context.Background(), 0, rows)
			}
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(filepath.Join(dir, "out.jsonl.parts", PartName(0, FormatJSONL)))
	must(t, err)
	if !want[string(b)] {
		t.Fatalf("the part (%d bytes) is none of the writers' whole parts", len(b))
	}
}

// A scan with IDsOnly finds the ids, lines, chunks, bad rows and
// duplicates a full read finds.
func TestIDsOnlyMatchesAFullRead(t *testing.T) {
	in := strings.Join([]string{
		`{"id":"a","x":1}`,
		`{"x":{"id":"inner"},"id":"b"}`,
		`{"nested":[{"id":"no"}],"y":"s,t}","id":7}`,
		`{"id":"a","x":2}`, // duplicate
		`  {"id" : "c" , "x": [1,2]}`,
		`{"x":1}`,           // no id
		`{"id":null}`,       // no id
		`{"id":""}`,         // empty
		`{"id":true}`,       // not an id
		`{"id":{"k":1}}`,    // not an id
		`{"i\u0064":"esc"}`, // escaped key: decoded
		`not json`,
		`{"id":"d"} {"id":"e"}`, // two values
		`[1,2]`,
		`{"id":1.5e3,"z":null}`,
		`{"id":"7"}`, // the same id text as 7 above
		``,
		`{"id":"f","s":"a\"b"}`,
	}, "\n") + "\n"
	read := func(idsOnly bool) string {
		r, err := NewReader(obj(in), FormatJSONL, Options{ChunkRows: 4, IDsOnly: idsOnly})
		must(t, err)
		var b strings.Builder
		for _, c := range readAll(t, r) {
			fmt.Fprintf(&b, "chunk %d at %d line %d: ids %v lines %v errors %v\n", c.Index, c.Offset, c.Line, c.IDs, c.Lines, c.Errors)
		}
		return b.String()
	}
	full, fast := read(false), read(true)
	if full != fast {
		t.Fatalf("IDsOnly read differs:\nfull:\n%s\nids only:\n%s", full, fast)
	}
}
