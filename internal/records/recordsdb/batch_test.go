package recordsdb

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/records"
)

// TestListMatchesReference writes records in many small batches, with
// times out of row order, bumps some and deletes the oldest, then checks
// every listing (filters, limits, pages) against a plain sort-and-filter
// of what was written: the early stop of List's walk over batches must
// never leave out a record nor reorder one.
func TestListMatchesReference(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var all []records.Record
	row := int64(0)
	for w := 0; w < 60; w++ {
		var ops []records.Op
		for range 1 + rng.IntN(12) {
			row++
			r := records.Record{Row: row, RequestID: []string{"r%d", "%06x"}[rng.IntN(2)], // a string, or hex (packed) Tenant: []string{"acme", "beta"}[rng.IntN(2)],
				Model: []string{"fraud", "churn", "team/x"}[rng.IntN(3)], Version: 1 + rng.IntN(2), Outcome: []string{"ok", "invalid_argument"}[rng.IntN(2)],
				InputHash: fmt.Sprintf("%064x", rng.Uint64()), LatencyMs: float64(rng.IntN(1000)) / 10, Attempts: 1,
				// Mostly increasing, sometimes far back, often equal: the
				// row breaks ties.
				CreatedAt: t0.Add(time.Duration(w*10+rng.IntN(15)-rng.IntN(3)*rng.IntN(40)) * time.Second)}
			r.RequestID = fmt.Sprintf(r.RequestID, rng.IntN(40))
			if rng.IntN(5) == 0 {
				r.Input = []byte(fmt.Sprint(`{"x":`, rng.IntN(9), `}`))
			}
			ops = append(ops, records.Op{Row: row, Record: r})
			all = append(all, r)
		}
		if len(all) > 3 && rng.IntN(3) == 0 {
			b := all[rng.IntN(len(all))]
			ops = append(ops, records.Op{Bump: true, Row: b.Row, Record: records.Record{Tenant: b.Tenant, RequestID: b.RequestID}})
			for i := range all {
				if all[i].Row == b.Row {
					all[i].Attempts++
				}
			}
		}
		if err := s.Write(ctx, ops); err != nil {
			t.Fatal(err)
		}
	}
	cut := t0.Add(90 * time.Second)
	n, err := s.DeleteBefore(ctx, cut)
	if err != nil {
		t.Fatal(err)
	}
	kept := all[:0:0]
	for _, r := range all {
		if !r.CreatedAt.Before(cut) {
			kept = append(kept, r)
		}
	}
	if want := int64(len(all) - len(kept)); n != want {
		t.Errorf("DeleteBefore = %d, want %d", n, want)
	}
	slices.SortFunc(kept, func(a, b records.Record) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.Row, a.Row)
	})
	ref := func(f records.Filter) []string {
		var out []string
		for _, r := range kept {
			if f.Tenant != "" && r.Tenant != f.Tenant || f.Model != "" && r.Model != f.Model || f.RequestID != "" && r.RequestID != f.RequestID ||
				f.Version != 0 && r.Version != f.Version || f.Outcome != "" && r.Outcome != f.Outcome ||
				!f.Since.IsZero() && r.CreatedAt.Before(f.Since) || !f.Matches(r.Model) {
				continue
			}
			out = append(out, fingerprint(r))
		}
		return out
	}
	filters := []records.Filter{{}, {Tenant: "acme"}, {Model: "churn"}, {RequestID: "r7"}, {RequestID: "000007"}, {RequestID: "00000"}, {RequestID: "00000x"}, {Version: 2, Outcome: "ok"},
		{Since: t0.Add(300 * time.Second)}, {Models: []string{"team/*"}}, {Models: []string{}}, {Tenant: "beta", Models: []string{"fraud", "churn"}}}
	for _, f := range filters {
		want := ref(f)
		for _, limit := range []int{1, 3, 7, 50, records.MaxLimit} {
			f := f
			f.Limit = limit
			var got []string
			for page := 0; page < 1000; page++ {
				rs, err := s.List(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rs {
					got = append(got, fingerprint(r))
				}
				if len(rs) < limit {
					break
				}
				last := rs[len(rs)-1]
				f.Before = &records.Position{CreatedAt: last.CreatedAt, Row: last.Row}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("filter %+v, pages of %d:\n got %v\nwant %v", f, limit, got, want)
			}
		}
	}
}

// fingerprint is every stored field of r.
func fingerprint(r records.Record) string {
	return fmt.Sprint(r.Row, r.RequestID, r.Tenant, r.Model, r.Version, r.Outcome, r.LatencyMs, r.CreatedAt.UnixMicro(), r.Attempts, r.InputHash, string(r.Input))
}

// TestConvertRowTable opens a records.db of the layout before batches (a
// row per record): its records are kept, in batches, and the next row
// ids come after them.
func TestConvertRowTable(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "records.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE records (id INTEGER PRIMARY KEY, request_id TEXT NOT NULL, tenant TEXT NOT NULL, model TEXT NOT NULL,
  version INTEGER NOT NULL, latency_ms REAL NOT NULL, outcome TEXT NOT NULL, input_hash TEXT NOT NULL, created_at INTEGER NOT NULL,
  attempts INTEGER NOT NULL, input BLOB);
CREATE INDEX records_created ON records (created_at)`); err != nil {
		t.Fatal(err)
	}
	const n = 1203        // three batches of 500 and one of 203
	tx, err := db.Begin() // one commit, not 1,203 (each a sync to disk)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		var input any
		if i%100 == 0 {
			input = []byte("in")
		}
		if _, err := tx.Exec(`INSERT INTO records VALUES (?, ?, 'acme', 'fraud', 2, 1.5, 'ok', 'h', ?, ?, ?)`,
			i*2, fmt.Sprint("r", i), t0.Add(time.Duration(i)*time.Second).UnixMicro(), 1+i%3, input); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if m, err := s.MaxRow(ctx); err != nil || m != 2*n {
		t.Errorf("MaxRow = %d, %v; want %d", m, err, 2*n)
	}
	rs, err := s.List(ctx, records.Filter{Limit: records.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != n {
		t.Fatalf("%d records after the conversion, want %d", len(rs), n)
	}
	r := rs[n-100] // r100
	if r.RequestID != "r100" || r.Row != 200 || r.Attempts != 2 || string(r.Input) != "in" || r.InputHash != "h" || r.LatencyMs != 1.5 ||
		r.Version != 2 || !r.CreatedAt.Equal(t0.Add(100*time.Second)) {
		t.Errorf("converted record: %+v", r)
	}
	var tables int
	if err := s.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name IN ('records', 'records_created')`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("the old table is still there (%d, %v)", tables, err)
	}
	if err := s.Write(ctx, []records.Op{{Record: records.Record{RequestID: "new"}}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.List(ctx, records.Filter{RequestID: "new"}); len(got) != 1 || got[0].Row != 2*n+1 {
		t.Errorf("a record after the conversion: %+v, want row %d", got, 2*n+1)
	}
}

// FuzzBatchReader: decoding any bytes ends (errDamaged or records) and
// never panics; an encoded batch decodes to what was encoded.
func FuzzBatchReader(f *testing.F) {
	var e batchEncoder
	e.add(7, &records.Record{RequestID: "a", Tenant: "t", Model: "m", Version: 3, LatencyMs: 2.5, Outcome: "ok", InputHash: fmt.Sprintf("%064x", 42), Input: []byte("x")}, 99, 2)
	e.add(8, &records.Record{RequestID: "b", InputHash: "not hex"}, -5, 1)
	f.Add(e.blob(nil))
	f.Add([]byte{batchVersion, 3, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, blob []byte) {
		var v recordView
		br := newBatchReader(blob)
		var rs []records.Record
		for br.next(&v) {
			rs = append(rs, v.record())
		}
		if br.err != nil {
			return
		}
		var e batchEncoder
		for i := range rs {
			e.addRecord(&rs[i])
		}
		br = newBatchReader(e.blob(nil))
		for i := 0; br.next(&v); i++ {
			if got := v.record(); fmt.Sprint(got) != fmt.Sprint(rs[i]) {
				t.Fatalf("round trip: %+v, want %+v", got, rs[i])
			}
		}
		if br.err != nil {
			t.Fatalf("a re-encoded batch does not decode: %v", br.err)
		}
	})
}

// Batches written before Record.Cached (encoding 1), before
// Record.Features (encoding 2) and before Record.Outputs (encoding 3)
// still read, with cached 0, no features, no outputs; one written now
// keeps them all.
func TestBatchVersions(t *testing.T) {
	r := records.Record{RequestID: "abcd", Tenant: "acme", Model: "fraud", Version: 3, Outcome: "ok", InputHash: "h", Attempts: 2, Cached: 7}
	var e batchEncoder
	e.add(5, &r, 1000, 2)
	blob := e.blob(nil)
	var v recordView
	if rd := newBatchReader(blob); !rd.next(&v) || v.record().Cached != 7 || v.record().Attempts != 2 || v.record().Features != nil {
		t.Fatalf("version %d: %+v (err %v)", batchVersion, v.record(), rd.err)
	}
	r.Features = []byte(`[{"entity":"c"}]`)
	var ef batchEncoder
	ef.add(5, &r, 1000, 2)
	if rd := newBatchReader(ef.blob(nil)); !rd.next(&v) || string(v.record().Features) != `[{"entity":"c"}]` {
		t.Fatalf("version %d with features: %+v (err %v)", batchVersion, v.record(), rd.err)
	}
	r.Outputs = []byte(`[{"y":1}]`)
	var eo batchEncoder
	eo.add(5, &r, 1000, 2)
	if rd := newBatchReader(eo.blob(nil)); !rd.next(&v) || string(v.record().Outputs) != `[{"y":1}]` || string(v.record().Features) != `[{"entity":"c"}]` {
		t.Fatalf("version %d with outputs: %+v (err %v)", batchVersion, v.record(), rd.err)
	}
	// The same record in encoding 3: no outputs after the features.
	v3 := append([]byte{batchV3}, blob[1:len(blob)-1]...)
	rd3 := newBatchReader(v3)
	if !rd3.next(&v) || v.record().Cached != 7 || v.record().Outputs != nil || rd3.next(&v) || rd3.err != nil {
		t.Fatalf("version 3: %+v (err %v)", v.record(), rd3.err)
	}
	// In encoding 2: no features after cached.
	v2 := append([]byte{batchV2}, blob[1:len(blob)-2]...)
	rd := newBatchReader(v2)
	if !rd.next(&v) || v.record().Cached != 7 || v.record().Features != nil {
		t.Fatalf("version 2: %+v (err %v)", v.record(), rd.err)
	}
	if rd.next(&v) || rd.err != nil {
		t.Fatalf("version 2: a second record or an error: %v", rd.err)
	}
	// In encoding 1: no cached field after the input either.
	old := append([]byte{batchV1}, blob[1:len(blob)-3]...)
	rd = newBatchReader(old)
	if !rd.next(&v) || v.record().Cached != 0 || v.record().RequestID != "abcd" || v.record().Attempts != 2 {
		t.Fatalf("version 1: %+v (err %v)", v.record(), rd.err)
	}
	if rd.next(&v) || rd.err != nil {
		t.Fatalf("version 1: a second record or an error: %v", rd.err)
	}
}
