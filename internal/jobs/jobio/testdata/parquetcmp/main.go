// Reads a 100k-row x 30-column Parquet file (id string + 29 float64) with
// parquet-go/parquet-go and apache/arrow-go/v18, decoding every value into a
// []any row, and prints time and allocations of each.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"
)

const nRows, nCols = 100_000, 30

func write(path string) {
	g := parquet.Group{"id": parquet.String()}
	for c := 1; c < nCols; c++ {
		g[fmt.Sprintf("f%02d", c)] = parquet.Leaf(parquet.DoubleType)
	}
	schema := parquet.NewSchema("row", g)
	f, _ := os.Create(path)
	w := parquet.NewWriter(f, schema, parquet.PageBufferSize(1<<20))
	// columns are sorted by name in a Group: id, f01..f29 -> order f01..f29, id
	cols := schema.Columns()
	idIdx := -1
	for i, c := range cols {
		if c[0] == "id" {
			idIdx = i
		}
	}
	buf := make([]parquet.Row, 0, 1000)
	for r := 0; r < nRows; r++ {
		row := make(parquet.Row, nCols)
		for i := range cols {
			if i == idIdx {
				row[i] = parquet.ValueOf(fmt.Sprintf("row-%d", r)).Level(0, 0, i)
			} else {
				row[i] = parquet.ValueOf(float64(r*i)*0.5).Level(0, 0, i)
			}
		}
		buf = append(buf, row)
		if len(buf) == cap(buf) {
			if _, err := w.WriteRows(buf); err != nil {
				panic(err)
			}
			buf = buf[:0]
		}
		if r%50000 == 49999 {
			w.Flush()
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	f.Close()
}

func readParquetGo(path string) int {
	f, _ := os.Open(path)
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		panic(err)
	}
	n := 0
	buf := make([]parquet.Row, 1000)
	out := make([]any, nCols)
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for {
			k, err := rows.ReadRows(buf)
			for _, row := range buf[:k] {
				for i, v := range row {
					switch v.Kind() {
					case parquet.Double:
						out[i] = v.Double()
					case parquet.ByteArray:
						out[i] = string(v.ByteArray())
					}
				}
				n++
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				panic(err)
			}
		}
		rows.Close()
	}
	return n
}

func readArrow(path string) int {
	f, _ := os.Open(path)
	defer f.Close()
	pr, err := file.NewParquetReader(f)
	if err != nil {
		panic(err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 1000}, memory.DefaultAllocator)
	if err != nil {
		panic(err)
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		panic(err)
	}
	defer rr.Release()
	n := 0
	out := make([]any, nCols)
	for rr.Next() {
		rec := rr.RecordBatch()
		cols := rec.Columns()
		for r := 0; r < int(rec.NumRows()); r++ {
			for i, c := range cols {
				switch a := c.(type) {
				case *array.Float64:
					out[i] = a.Value(r)
				case *array.String:
					out[i] = a.Value(r)
				case *array.Binary:
					out[i] = string(a.Value(r))
				default:
					_ = arrow.PrimitiveTypes
				}
			}
			n++
		}
	}
	if err := rr.Err(); err != nil && err != io.EOF {
		panic(err)
	}
	return n
}

func measure(name string, fn func(string) int, path string) {
	for rep := 0; rep < 3; rep++ {
		runtime.GC()
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		t := time.Now()
		n := fn(path)
		d := time.Since(t)
		runtime.ReadMemStats(&b)
		fmt.Printf("%-12s rows=%d time=%v allocs=%d bytes=%.1fMB\n", name, n, d.Round(time.Millisecond), b.Mallocs-a.Mallocs, float64(b.TotalAlloc-a.TotalAlloc)/1e6)
	}
}

func main() {
	path := filepath.Join(os.TempDir(), "parquetcmp.parquet")
	defer os.Remove(path)
	write(path)
	st, _ := os.Stat(path)
	fmt.Println("file bytes", st.Size())
	measure("parquet-go", readParquetGo, path)
	measure("arrow-go", readArrow, path)
}
