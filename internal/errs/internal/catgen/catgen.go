// Package catgen reads internal/errs/catalogue.tsv and generates from it
// the Go table of package errs (catalogue_gen.go) and docs/errors.md. It is
// used by `go generate ./internal/errs` (gen.go) and by the errs test that
// fails when the generated files are not what the catalogue says.
package catgen

import (
	"bytes"
	"fmt"
	"go/format"
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
)

// The files, relative to internal/errs.
const (
	Source = "catalogue.tsv"
	GoFile = "catalogue_gen.go"
	Docs   = "../../docs/errors.md"
)

// Columns is the catalogue's header row.
var Columns = []string{"code", "name", "http", "grpc", "refusal", "refund", "retry_worker", "retry_client", "retry_after", "doc"}

// Refusal kinds (the refusal column), with what each means in the docs.
var refusals = map[string]string{
	"capacity":  "the version has no room for the request in time",
	"readiness": "the version cannot run it now (not ready, or not loaded)",
	"closing":   "the server or worker is draining",
	"quota":     "the tenant is over its quota",
}

// Row is one code of the catalogue.
type Row struct {
	Line        int // in the source, for messages
	Code        string
	Name        string // the Go constant
	HTTP        int
	GRPC        string // a google.golang.org/grpc/codes name
	Refusal     string // "" or a kind of refusals
	Refund      bool
	RetryWorker bool
	RetryClient bool
	RetryAfter  string // "": never sent
	Doc         string
}

var (
	codeRE = regexp.MustCompile(`^[a-z][a-z_]*[a-z]$`)
	nameRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

// grpcNames are the names of the gRPC codes ("Unavailable").
func grpcNames() map[string]bool {
	out := map[string]bool{}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		out[c.String()] = true
	}
	return out
}

// Parse reads the catalogue. Errors name the line and the column.
func Parse(src []byte) ([]Row, error) {
	var rows []Row
	header := false
	seenCode, seenName := map[string]int{}, map[string]int{}
	grpc := grpcNames()
	for i, line := range strings.Split(string(src), "\n") {
		ln := i + 1
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if !header {
			if strings.Join(f, ",") != strings.Join(Columns, ",") {
				return nil, fmt.Errorf("%s:%d: the header must be the tab-separated columns %s", Source, ln, strings.Join(Columns, " "))
			}
			header = true
			continue
		}
		if len(f) != len(Columns) {
			return nil, fmt.Errorf("%s:%d: %d tab-separated fields, want %d (%s)", Source, ln, len(f), len(Columns), strings.Join(Columns, " "))
		}
		bad := func(col int, format string, args ...any) error {
			return fmt.Errorf("%s:%d: column %s: %s", Source, ln, Columns[col], fmt.Sprintf(format, args...))
		}
		yes := func(col int) (bool, error) {
			switch f[col] {
			case "yes":
				return true, nil
			case "no":
				return false, nil
			}
			return false, bad(col, "must be yes or no, got %q", f[col])
		}
		r := Row{Line: ln, Code: f[0], Name: f[1], GRPC: f[3], Doc: strings.TrimSpace(f[9])}
		if !codeRE.MatchString(r.Code) {
			return nil, bad(0, "%q is not a snake_case code", r.Code)
		}
		if l, dup := seenCode[r.Code]; dup {
			return nil, bad(0, "code %s is already on line %d", r.Code, l)
		}
		seenCode[r.Code] = ln
		if !nameRE.MatchString(r.Name) {
			return nil, bad(1, "%q is not an exported Go name", r.Name)
		}
		if l, dup := seenName[r.Name]; dup {
			return nil, bad(1, "name %s is already on line %d", r.Name, l)
		}
		seenName[r.Name] = ln
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 400 || n > 599 {
			return nil, bad(2, "must be an HTTP error status 400–599, got %q", f[2])
		}
		r.HTTP = n
		if !grpc[r.GRPC] || r.GRPC == "OK" {
			return nil, bad(3, "%q is not a gRPC error code name (Unavailable, InvalidArgument, …)", r.GRPC)
		}
		if f[4] != "-" {
			if _, ok := refusals[f[4]]; !ok {
				return nil, bad(4, "must be - or one of capacity, readiness, closing, quota; got %q", f[4])
			}
			r.Refusal = f[4]
		}
		if r.Refund, err = yes(5); err != nil {
			return nil, err
		}
		if r.RetryWorker, err = yes(6); err != nil {
			return nil, err
		}
		if r.RetryClient, err = yes(7); err != nil {
			return nil, err
		}
		if f[8] == "" {
			return nil, bad(8, "must be - (never sent) or how the value is set")
		}
		if f[8] != "-" {
			r.RetryAfter = f[8]
		}
		switch {
		case r.Doc == "":
			return nil, bad(9, "say when the code is returned")
		case r.Refund && r.Refusal == "":
			return nil, bad(5, "only a refusal refunds the quota (nothing was computed)")
		case r.Refusal != "" && !r.RetryClient:
			return nil, bad(7, "a refusal is worth retrying by the client: yes")
		case r.Refusal != "" && r.RetryAfter == "":
			return nil, bad(8, "a refusal says when to retry")
		case r.RetryWorker && r.HTTP < 500:
			return nil, bad(6, "only a server-side failure (5xx) is tried on another worker")
		}
		rows = append(rows, r)
	}
	if !header {
		return nil, fmt.Errorf("%s: no header row", Source)
	}
	if _, ok := seenCode["internal"]; !ok {
		return nil, fmt.Errorf("%s: there must be an internal code (what an unknown error becomes)", Source)
	}
	return rows, nil
}

// Generate returns the Go file and the docs page for the catalogue src.
func Generate(src []byte) (goSrc, docs []byte, err error) {
	rows, err := Parse(src)
	if err != nil {
		return nil, nil, err
	}
	if goSrc, err = goFile(rows); err != nil {
		return nil, nil, err
	}
	return goSrc, markdown(rows), nil
}

const header = "Code generated by `go generate ./internal/errs` from internal/errs/catalogue.tsv; DO NOT EDIT."

func goFile(rows []Row) ([]byte, error) {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("// %s\n\npackage errs\n\nimport (\n\t\"net/http\"\n\n\t\"google.golang.org/grpc/codes\"\n)\n\n", header)
	p("// The codes, in the catalogue's order.\nconst (\n")
	for _, r := range rows {
		p("\t// %s: %s\n\t%s Code = %q\n", r.Name, comment(r.Doc), r.Name, r.Code)
	}
	p(")\n\n")
	p("// catalogue is catalogue.tsv, one Entry per code.\nvar catalogue = [...]Entry{\n")
	for _, r := range rows {
		p("\t{Code: %s, HTTP: %s, GRPC: codes.%s", r.Name, statusName(r.HTTP), r.GRPC)
		if r.Refusal != "" {
			p(", Refusal: Refusal%s", strings.ToUpper(r.Refusal[:1])+r.Refusal[1:])
		}
		if r.Refund {
			p(", Refund: true")
		}
		if r.RetryWorker {
			p(", RetryWorker: true")
		}
		if r.RetryClient {
			p(", RetryClient: true")
		}
		if r.RetryAfter != "" {
			p(", RetryAfter: %q", r.RetryAfter)
		}
		p(",\n\t\tDoc: %q},\n", r.Doc)
	}
	p("}\n\n")
	p("// index is c's row in catalogue, -1 for an unknown code.\nfunc index(c Code) int {\n\tswitch c {\n")
	for i, r := range rows {
		p("\tcase %s:\n\t\treturn %d\n", r.Name, i)
	}
	p("\t}\n\treturn -1\n}\n")
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("generated Go does not parse: %w", err)
	}
	return out, nil
}

// comment is s on one comment line (the docs' backticks kept).
func comment(s string) string { return strings.ReplaceAll(s, "\n", " ") }

var statusNames = map[int]string{
	400: "StatusBadRequest", 401: "StatusUnauthorized", 403: "StatusForbidden", 404: "StatusNotFound",
	405: "StatusMethodNotAllowed", 409: "StatusConflict", 413: "StatusRequestEntityTooLarge",
	415: "StatusUnsupportedMediaType", 422: "StatusUnprocessableEntity", 429: "StatusTooManyRequests",
	500: "StatusInternalServerError", 503: "StatusServiceUnavailable", 504: "StatusGatewayTimeout",
}

func statusName(n int) string {
	if s, ok := statusNames[n]; ok {
		return "http." + s
	}
	return strconv.Itoa(n)
}

func markdown(rows []Row) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Error codes\n\n<!-- %s -->\n\n", header)
	p("Every error Sluice answers carries one of these stable codes (the body is\n" +
		"described in [api.md](api.md#errors)); clients switch on the code, never on\n" +
		"the message. The table is `internal/errs/catalogue.tsv`, the one place a code\n" +
		"is defined: the Go table every layer reads (`errs.Lookup`) and this page are\n" +
		"generated from it, and a test fails when either is out of date. An unknown\n" +
		"code (from a newer peer) is treated as `internal`: 500, gRPC `Internal`.\n\n")
	p("## Codes\n\nHTTP is the status of the `/v1` and OIP REST answers; gRPC is the status\n" +
		"code of the OIP gRPC service and of the gateway ↔ worker hop.\n\n")
	p("| code | HTTP | gRPC | returned when |\n|---|---|---|---|\n")
	for _, r := range rows {
		p("| `%s` | %d | `%s` | %s |\n", r.Code, r.HTTP, r.GRPC, cell(r.Doc))
	}
	p("\n## Handling\n\n")
	p("- **refusal**: the request was turned away before anything was computed;\n" +
		"  it is counted in `sluice_refusals_total{reason=\"<code>\"}` (every reason is\n" +
		"  registered at 0 for each version). Kinds:\n")
	for _, k := range []string{"capacity", "readiness", "closing", "quota"} {
		p("  - `%s`: %s;\n", k, refusals[k])
	}
	b.Truncate(b.Len() - 2)
	p(".\n\n  With `--workers`, `capacity` and `readiness` refusals also count as demand\n" +
		"  the version could not take (the autoscaler's signal); a shadow copy refused\n" +
		"  for `capacity` or `closing` is counted as dropped, not as a shadow error.\n")
	p("- **refunds quota**: the instances taken from the tenant's quota for the\n" +
		"  request are given back (`quota_exceeded` itself spends nothing).\n")
	p("- **another worker**: with `--workers`, the gateway sends the request once\n" +
		"  to another worker holding the version, inside its deadline, before\n" +
		"  answering with this code.\n")
	p("- **client retry**: the same request may succeed when sent again later\n" +
		"  (after `Retry-After` when given; with an `X-Request-Id` these answers are\n" +
		"  not replayed, so a retry computes).\n")
	p("- **`Retry-After`**: how the header's value (whole seconds, rounded up) is\n" +
		"  set; the OIP gRPC service sends it as `retry-after` response metadata.\n" +
		"  — means it is never sent.\n\n")
	p("| code | refusal | refunds quota | another worker | client retry | `Retry-After` |\n|---|---|---|---|---|---|\n")
	yn := func(v bool) string {
		if v {
			return "yes"
		}
		return "no"
	}
	for _, r := range rows {
		ref, ra := "—", "—"
		if r.Refusal != "" {
			ref = r.Refusal
		}
		if r.RetryAfter != "" {
			ra = cell(r.RetryAfter)
		}
		p("| `%s` | %s | %s | %s | %s | %s |\n", r.Code, ref, yn(r.Refund), yn(r.RetryWorker), yn(r.RetryClient), ra)
	}
	return b.Bytes()
}

// cell escapes a table cell's pipes.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
