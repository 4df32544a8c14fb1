package errs

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sluiceml/sluice/internal/errs/internal/catgen"
)

var update = flag.Bool("update", false, "rewrite catalogue_gen.go and docs/errors.md from catalogue.tsv")

// TestCatalogueUpToDate: catalogue_gen.go and docs/errors.md are what
// catalogue.tsv generates (go generate ./internal/errs, or -update).
func TestCatalogueUpToDate(t *testing.T) {
	src, err := os.ReadFile(catgen.Source)
	if err != nil {
		t.Fatal(err)
	}
	goSrc, docs, err := catgen.Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		want []byte
	}{{catgen.GoFile, goSrc}, {catgen.Docs, docs}} {
		if *update {
			if err := os.WriteFile(f.path, f.want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is not what %s generates: run `go generate ./internal/errs` (or go test ./internal/errs -update)", f.path, catgen.Source)
		}
	}
}

// Every code has a row that makes sense: a status, a gRPC code, a doc
// line, and rules that agree with one another.
func TestCatalogueRows(t *testing.T) {
	seen := map[Code]bool{}
	for _, c := range Codes() {
		e := Lookup(c)
		if seen[c] {
			t.Errorf("%s listed twice", c)
		}
		seen[c] = true
		if e.Code != c || e.HTTP < 400 || e.HTTP > 599 || e.GRPC == codes.OK || strings.TrimSpace(e.Doc) == "" {
			t.Errorf("%s: row %+v lacks a status, a gRPC code or a doc line", c, e)
		}
		if e.Refund && e.Refusal == "" {
			t.Errorf("%s refunds the quota but is no refusal", c)
		}
		if e.Refusal != "" && (e.RetryAfter == "" || !e.RetryClient || e.HTTP < 429) {
			t.Errorf("%s is a refusal: it must say when to retry", c)
		}
		if e.RetryWorker && e.HTTP < 500 {
			t.Errorf("%s is a client error tried on another worker", c)
		}
	}
	if len(seen) != len(catalogue) {
		t.Errorf("%d codes, %d rows", len(seen), len(catalogue))
	}
	if u := Lookup("no_such_code"); u.HTTP != 500 || u.GRPC != codes.Internal || u.Refusal != "" || u.Refund || u.RetryWorker {
		t.Errorf("an unknown code must be treated as internal, got %+v", u)
	}
	if e := Of(nil); e.Refusal != "" || e.Refund || e.RetryWorker {
		t.Errorf("Of(nil) = %+v, want the zero row", e)
	}
	if got := Of(New(ColdStart, "x")); got.Code != ColdStart || !got.Refund {
		t.Errorf("Of(cold_start) = %+v", got)
	}
	var refusals []string
	for _, c := range Refusals() {
		refusals = append(refusals, string(c))
	}
	// The refusal reasons of sluice_refusals_total; alerts and dashboards
	// name them, so a reason is never renamed or dropped.
	if got, want := strings.Join(refusals, ","), "quota_exceeded,deadline_infeasible,not_ready,cold_start,queue_full,shutting_down"; got != want {
		t.Errorf("refusals %s, want %s", got, want)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	for _, tc := range []struct {
		e    *Error
		want string
	}{
		{nil, ""},
		{&Error{Code: QueueFull}, ""},
		{&Error{Code: QueueFull, RetryAfter: 1500 * time.Millisecond}, "2"},
		{&Error{Code: ColdStart, RetryAfter: 300 * time.Millisecond}, "1"},
		{&Error{Code: QuotaExceeded, RetryAfter: 3 * time.Second}, "3"},
		{&Error{Code: Unavailable, RetryAfter: 30 * time.Second}, "30"},
		{&Error{Code: InvalidArgument, RetryAfter: time.Second}, ""}, // never sent for this code
		{&Error{Code: "no_such_code", RetryAfter: time.Second}, ""},
	} {
		if got := RetryAfterHeader(tc.e); got != tc.want {
			t.Errorf("RetryAfterHeader(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}
