package jobio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/sluiceml/sluice/internal/registry/s3/s3test"
)

// The S3 store on a real S3-compatible server (make test-s3): reading
// JSONL, CSV resumed at an offset (ranged reads) and Parquet (footer by
// ReadAt), and an output's parts committed, resumed and assembled.
func TestS3Store(t *testing.T) {
	endpoint := s3test.Endpoint(t)
	bucket := s3test.Bucket(t, endpoint)
	cl := s3test.Client(t, endpoint)
	ctx := context.Background()
	put := func(key string, b []byte) {
		if _, err := cl.PutObject(ctx, bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := NewS3Store(cl, bucket)

	loc, err := ParseURI("s3://"+bucket+"/in/missing.jsonl", "")
	must(t, err)
	if _, err := s.Open(ctx, loc.Path); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), loc.URI) {
		t.Fatalf("Open(missing) = %v; want not-exist naming %s", err, loc.URI)
	}

	var jl strings.Builder
	for i := 0; i < 25; i++ {
		fmt.Fprintf(&jl, "{\"id\":\"j%d\",\"x\":%d}\n", i, i)
	}
	put("in/rows.jsonl", []byte(jl.String()))
	o, err := s.Open(ctx, "in/rows.jsonl")
	must(t, err)
	r, err := NewReader(o, FormatJSONL, Options{ChunkRows: 10})
	must(t, err)
	chunks := readAll(t, r)
	o.Close()
	if len(chunks) != 3 || chunks[2].IDs[4] != "j24" {
		t.Fatalf("jsonl chunks %+v", chunks)
	}

	put("in/rows.csv", []byte("id,x\na,1\nb,2\nc,3\nd,4\n"))
	o, err = s.Open(ctx, "in/rows.csv")
	must(t, err)
	r, err = NewReader(o, FormatCSV, Options{ChunkRows: 2, Fields: []Field{{"x", Number}}})
	must(t, err)
	csvChunks := readAll(t, r)
	o.Close()
	o, err = s.Open(ctx, "in/rows.csv")
	must(t, err)
	r, err = NewReader(o, FormatCSV, Options{ChunkRows: 2, Fields: []Field{{"x", Number}}, Start: Start{Chunk: 1, Offset: csvChunks[1].Offset}})
	must(t, err)
	resumed := readAll(t, r)
	o.Close()
	if len(resumed) != 1 || strings.Join(resumed[0].IDs, ",") != "c,d" || resumed[0].Rows[1]["x"] != 4.0 {
		t.Fatalf("csv resumed %+v", resumed)
	}

	put("in/rows.parquet", writeParquetInput(t, 25, 7))
	o, err = s.Open(ctx, "in/rows.parquet")
	must(t, err)
	r, err = NewReader(o, FormatParquet, Options{ChunkRows: 10, Start: Start{Chunk: 1, Offset: 10}})
	must(t, err)
	pq := readAll(t, r)
	o.Close()
	if len(pq) != 2 || pq[0].IDs[0] != "p10" {
		t.Fatalf("parquet chunks %+v", pq)
	}

	for _, format := range []string{FormatJSONL, FormatCSV, FormatParquet} {
		key := "out/result." + format
		parts, err := s.Parts(ctx, key)
		must(t, err)
		w, err := OpenOutput(ctx, parts, format, []string{"score"})
		must(t, err)
		rows := func(i int) []OutRow {
			return []OutRow{{ID: fmt.Sprintf("o%d", i), VersionID: "v1", Outputs: map[string]any{"score": float64(i)}}}
		}
		for i := 0; i < 3; i++ {
			_, err := w.WriteChunk(ctx, i, rows(i))
			must(t, err)
		}
		// A failed part write commits nothing.
		err = parts.Commit(ctx, PartName(3, format), func(w io.Writer) error {
			w.Write([]byte("half"))
			return errors.New("crash")
		})
		if err == nil {
			t.Fatal("a failed write committed")
		}
		parts2, err := s.Parts(ctx, key)
		must(t, err)
		w2, err := OpenOutput(ctx, parts2, format, []string{"score"})
		must(t, err)
		if got := fmt.Sprint(w2.CommittedChunks()); got != "[0 1 2]" {
			t.Fatalf("%s: committed %s", format, got)
		}
		for i := 2; i < 5; i++ {
			_, err := w2.WriteChunk(ctx, i, rows(i))
			must(t, err)
		}
		must(t, w2.Assemble(ctx, 5))
		must(t, w2.Assemble(ctx, 5))
		o, err := s.Open(ctx, key)
		must(t, err)
		b, err := io.ReadAll(o)
		o.Close()
		must(t, err)
		var ids []string
		switch format {
		case FormatParquet:
			pr, err := NewReader(memObject{bytes.NewReader(b)}, FormatParquet, Options{})
			must(t, err)
			for _, c := range readAll(t, pr) {
				ids = append(ids, c.IDs...)
			}
		case FormatCSV:
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
				ids = append(ids, strings.Split(l, ",")[0])
			}
		default:
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				ids = append(ids, strings.Split(l, "\"")[3])
			}
		}
		if got := strings.Join(ids, ","); got != "o0,o1,o2,o3,o4" {
			t.Errorf("%s output ids %s", format, got)
		}
		must(t, parts2.RemoveAll(ctx))
		if names, err := parts2.Committed(ctx); err != nil || len(names) != 0 {
			t.Errorf("%s: parts left after RemoveAll: %v %v", format, names, err)
		}
		if o, err := s.Open(ctx, key); err != nil {
			t.Errorf("%s: the output went with its parts: %v", format, err)
		} else {
			o.Close()
		}
	}
}
