package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/sluiceml/sluice"

// tableHeading is the section of docs/design.md that holds the import table.
const tableHeading = "## Allowed imports"

var printTable = flag.Bool("print-table", false, "print the import table of the code as it is now (markdown, for docs/design.md)")

// pkg is one package of the module as `go list` reports it.
type pkg struct {
	ImportPath   string
	Name         string
	Imports      []string
	TestImports  []string
	XTestImports []string
	DepOnly      bool // not in ./..., only a dependency
	Error        *struct{ Err string }
}

// root is the module's directory.
func root(t *testing.T) string {
	t.Helper()
	out := goCmd(t, "", "env", "GOMOD")
	gomod := strings.TrimSpace(out)
	if gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD: not in a module (%q)", gomod)
	}
	return filepath.Dir(gomod)
}

// goCmd runs the go command in dir and returns its standard output.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := run(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func run(dir string, args ...string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is needed to list the module's packages: %v", err)
	}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// graph is the module's packages and everything they link, as one
// `go list -deps` reports them (listed once for all the tests).
type graph struct {
	dir string
	mod []pkg           // the module's packages, as ./... lists them
	all map[string]*pkg // by import path: these and every dependency
}

var (
	graphOnce sync.Once
	theGraph  *graph
	graphErr  error
)

// load lists the module's packages with their imports, and their
// dependencies' imports.
func load(t *testing.T) *graph {
	t.Helper()
	dir := root(t)
	graphOnce.Do(func() {
		theGraph, graphErr = list(dir)
	})
	if graphErr != nil {
		t.Fatal(graphErr)
	}
	return theGraph
}

func list(dir string) (*graph, error) {
	out, err := run(dir, "list", "-e", "-deps", "-json=ImportPath,Name,Imports,TestImports,XTestImports,DepOnly,Error", "./...")
	if err != nil {
		return nil, err
	}
	g := &graph{dir: dir, all: map[string]*pkg{}}
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list -json: %v", err)
		}
		if p.Error != nil && !p.DepOnly {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		g.all[p.ImportPath] = &p
		if !p.DepOnly {
			g.mod = append(g.mod, p)
		}
	}
	if len(g.mod) == 0 {
		return nil, errors.New("go list ./... found no packages")
	}
	return g, nil
}

// short is the name a package has in docs/design.md: its path in the
// module without "internal/" ("" for a path outside the module).
func short(path string) string {
	rel, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return ""
	}
	return strings.TrimPrefix(rel, "internal/")
}

// row is one line of the import table.
type row struct {
	line    int
	imports map[string]bool // may import
	tests   map[string]bool // its tests may also import
}

var backticked = regexp.MustCompile("`([^`]*)`")

// names reads the backticked package names of a cell ("—" or "" is none).
func names(cell string) map[string]bool {
	m := map[string]bool{}
	for _, s := range backticked.FindAllStringSubmatch(cell, -1) {
		m[s[1]] = true
	}
	return m
}

// parseTable reads the import table under tableHeading in design.md.
func parseTable(design []byte) (map[string]row, error) {
	rows := map[string]row{}
	sc := bufio.NewScanner(bytes.NewReader(design))
	in, seen, n := false, 0, 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "## ") {
			in = line == tableHeading
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		seen++
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			return nil, fmt.Errorf("docs/design.md:%d: an import table row has 3 cells (package | may import | its tests may also import), this one has %d", n, len(cells))
		}
		if seen <= 2 { // header and separator
			continue
		}
		p := names(cells[0])
		if len(p) != 1 {
			return nil, fmt.Errorf("docs/design.md:%d: the first cell names one package in backticks, got %q", n, strings.TrimSpace(cells[0]))
		}
		name := slices.Collect(maps.Keys(p))[0]
		if prev, dup := rows[name]; dup {
			return nil, fmt.Errorf("docs/design.md:%d: a second row for `%s` (the first is on line %d)", n, name, prev.line)
		}
		rows[name] = row{line: n, imports: names(cells[1]), tests: names(cells[2])}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("docs/design.md has no import table under %q", tableHeading)
	}
	return rows, nil
}

// edges is a package's imports of other module packages, by short name:
// its own and, apart, the ones only its tests add.
func edges(p pkg) (imports, tests []string) {
	self := short(p.ImportPath)
	own := map[string]bool{}
	for _, i := range p.Imports {
		if s := short(i); s != "" {
			own[s] = true
		}
	}
	more := map[string]bool{}
	for _, i := range slices.Concat(p.TestImports, p.XTestImports) {
		if s := short(i); s != "" && s != self && !own[s] {
			more[s] = true
		}
	}
	return slices.Sorted(maps.Keys(own)), slices.Sorted(maps.Keys(more))
}

func cell(names []string) string {
	if len(names) == 0 {
		return "—"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	return strings.Join(q, ", ")
}

// Every import edge between the module's library packages is in the
// import table of docs/design.md. Commands (package main: cmd/, bench/)
// are the roots that wire everything together and have no row.
func TestImportTable(t *testing.T) {
	g := load(t)
	dir := g.dir
	var libs []pkg
	byName := map[string]string{}
	for _, p := range g.mod {
		if p.Name == "main" {
			continue
		}
		s := short(p.ImportPath)
		if other, dup := byName[s]; dup {
			t.Fatalf("%s and %s both have the name %q in docs/design.md's import table: rename one", other, p.ImportPath, s)
		}
		byName[s] = p.ImportPath
		libs = append(libs, p)
	}
	if *printTable {
		var b strings.Builder
		b.WriteString("| package | may import | its tests may also import |\n| --- | --- | --- |\n")
		for _, p := range libs {
			imp, tst := edges(p)
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", short(p.ImportPath), cell(imp), cell(tst))
		}
		t.Logf("the import table of the code as it is:\n%s", b.String())
	}
	design, err := os.ReadFile(filepath.Join(dir, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseTable(design)
	if err != nil {
		t.Fatal(err)
	}
	const how = "If the layering rules of docs/design.md allow it, add `%s` to the %s cell of the row `%s` in docs/design.md (%s); otherwise remove the import."
	for _, p := range libs {
		s := short(p.ImportPath)
		imp, tst := edges(p)
		r, ok := rows[s]
		if !ok {
			t.Errorf("%s has no row in docs/design.md's import table (%s): add\n\t| `%s` | %s | %s |\n(the imports it has now: keep only those the layering rules allow)", p.ImportPath, tableHeading, s, cell(imp), cell(tst))
			continue
		}
		for _, i := range imp {
			if !r.imports[i] {
				t.Errorf("%s imports %s/internal/%s: the row `%s` (docs/design.md:%d) does not allow it. "+how, p.ImportPath, module, i, s, r.line, i, `"may import"`, s, tableHeading)
			}
		}
		for _, i := range tst {
			if !r.imports[i] && !r.tests[i] {
				t.Errorf("a test of %s imports %s: the row `%s` (docs/design.md:%d) allows it in neither cell. "+how, p.ImportPath, i, s, r.line, i, `"its tests may also import"`, s, tableHeading)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rows)) {
		r := rows[name]
		if _, ok := byName[name]; !ok {
			t.Errorf("docs/design.md:%d: the import table has a row for `%s`, which is not a library package of the module: remove or rename it", r.line, name)
		}
		for _, i := range slices.Sorted(maps.Keys(maps.Collect(func(yield func(string, bool) bool) {
			for k := range r.imports {
				yield(k, true)
			}
			for k := range r.tests {
				yield(k, true)
			}
		}))) {
			if _, ok := byName[i]; !ok {
				t.Errorf("docs/design.md:%d: the row `%s` allows `%s`, which is not a library package of the module: remove or rename it", r.line, name, i)
			}
		}
	}
}

// rule is a package that must not link some others, and why.
type rule struct{ prefix, why string }

// stores are the packages of the stores: the data plane knows nothing of
// them (docs/design.md).
var stores = []rule{
	{"github.com/jackc/pgx", "PostgreSQL driver (the stores)"},
	{"modernc.org/sqlite", "SQLite driver (the stores)"},
	{module + "/internal/pgdb", "PostgreSQL stores"},
	{module + "/internal/records/recordsdb", "prediction records' databases"},
	{module + "/internal/jobs/jobsdb", "batch jobs' databases"},
	{module + "/internal/registry", "registry store"},
	{"github.com/redis/rueidis", "Redis client (the feature store)"},
	{module + "/internal/features/redisfeat", "Redis feature store"},
	{module + "/internal/features/pgfeat", "PostgreSQL feature store"},
}

// workerForbidden are the packages a worker must not link: it hosts
// replicas and answers the hop, nothing else (docs/design.md: a worker
// knows nothing of tenants, deployments or HTTP).
var workerForbidden = append(slices.Clip(stores),
	rule{module + "/internal/records", "prediction records"},
	rule{module + "/internal/tenant", "tenants"},
	rule{module + "/internal/routing", "deployments' routing"},
	rule{module + "/internal/control", "deployment controller"},
	rule{module + "/internal/kube", "Kubernetes pool controller"},
	rule{module + "/internal/gateway", "the gateway's predict call"},
	rule{module + "/internal/oip", "the gateway-facing OIP transport model (the worker speaks internal/hop)"},
	rule{module + "/internal/server", "HTTP transport"},
)

// allowedUnder are packages under a forbidden prefix that may be linked
// all the same: the generated OIP code is the hop's wire too.
var allowedUnder = map[string]bool{module + "/internal/oip/inferencepb": true}

// The worker links no store, tenant, routing, gateway or registry package.
func TestWorkerLinksNoStore(t *testing.T) {
	checkDeps(t, load(t), module+"/internal/worker", workerForbidden,
		"a worker knows nothing of tenants, deployments, stores or HTTP; move what it needs into a package that imports none (as internal/hop)")
}

// The data plane links no store and no control plane package: serving
// goes on with the last snapshot when they are down.
func TestDataPlaneLinksNoStore(t *testing.T) {
	forbidden := append(slices.Clip(stores),
		rule{module + "/internal/control", "deployment controller"},
		rule{module + "/internal/kube", "Kubernetes pool controller"})
	g := load(t)
	for _, p := range []string{"gateway", "routing", "serving", "hosting", "cluster", "hop", "oip", "server/oipgrpc"} {
		checkDeps(t, g, module+"/internal/"+p, forbidden,
			"the data plane knows nothing of the store and never waits on the control plane; reach it through an interface the caller passes in")
	}
}

// Runtimes know nothing of HTTP: no transport, gateway or store behind
// a runtime.
func TestRuntimesLinkNoTransport(t *testing.T) {
	forbidden := append(slices.Clip(stores),
		rule{module + "/internal/server", "HTTP transport"},
		rule{module + "/internal/api", "the public API's wire types"},
		rule{module + "/internal/oip", "the gateway-facing OIP transport model"},
		rule{module + "/internal/gateway", "the gateway's predict call"},
		rule{module + "/internal/tenant", "tenants"})
	g := load(t)
	var rts []string
	for _, p := range g.mod {
		if rt := module + "/internal/runtime"; p.ImportPath == rt || strings.HasPrefix(p.ImportPath, rt+"/") {
			rts = append(rts, p.ImportPath)
		}
	}
	if len(rts) < 2 {
		t.Fatalf("found the runtimes %v, want internal/runtime and its subpackages", rts)
	}
	for _, p := range rts {
		checkDeps(t, g, p, forbidden,
			"runtimes know nothing of HTTP, tenants or the store; a runtime turns batches into outputs")
	}
}

// checkDeps fails for every package of forbidden that pkg links, naming
// the importers where pkg's graph enters it.
func checkDeps(t *testing.T, g *graph, pkg string, forbidden []rule, fix string) {
	t.Helper()
	if g.all[pkg] == nil {
		t.Fatalf("%s is not a package of the module: update this test", pkg)
	}
	// Walk pkg's imports (not its tests'): what it links.
	seen := map[string]bool{pkg: true}
	by := map[string][]string{}
	for queue := []string{pkg}; len(queue) > 0; queue = queue[1:] {
		p := g.all[queue[0]]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			by[imp] = append(by[imp], p.ImportPath)
			if !seen[imp] {
				seen[imp] = true
				queue = append(queue, imp)
			}
		}
	}
	why := map[string]string{}
	for d := range seen {
		if allowedUnder[d] {
			continue
		}
		for _, r := range forbidden {
			if d == r.prefix || strings.HasPrefix(d, r.prefix+"/") {
				why[d] = r.why
			}
		}
	}
	// Report where pkg's own graph enters the forbidden one, not every
	// package behind that edge.
	for _, d := range slices.Sorted(maps.Keys(why)) {
		from := slices.DeleteFunc(slices.Clone(by[d]), func(imp string) bool { _, bad := why[imp]; return bad })
		if len(from) == 0 {
			continue
		}
		slices.Sort(from)
		t.Errorf("%s links %s (%s), imported by %s: %s", pkg, d, why[d], strings.Join(from, ", "), fix)
	}
}

// layoutEntry matches a package line of the layout's tree: an indented
// name ending in "/".
var layoutEntry = regexp.MustCompile(`^( *)([a-z0-9_]+(?:/[a-z0-9_]+)*)/(\s|$)`)

// The layout in docs/design.md names every package under internal/, and
// no package that is gone.
func TestLayoutNamesEveryPackage(t *testing.T) {
	g := load(t)
	design, err := os.ReadFile(filepath.Join(g.dir, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{} // package under internal/ → line
	in, block, n := false, false, 0
	var stack []string // the tree's path at each depth under internal/
	sc := bufio.NewScanner(bytes.NewReader(design))
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Layout"
			continue
		}
		if !in {
			continue
		}
		if strings.HasPrefix(line, "```") {
			block = !block
			continue
		}
		if !block {
			continue
		}
		if strings.HasPrefix(line, "internal/") {
			stack = []string{}
			continue
		}
		m := layoutEntry.FindStringSubmatch(line)
		if stack == nil || m == nil {
			if stack != nil && !strings.HasPrefix(line, " ") {
				stack = nil // past internal/
			}
			continue
		}
		depth := len(m[1]) / 2
		if len(m[1])%2 != 0 || depth < 1 || depth > len(stack)+1 {
			continue // a continuation line of a description
		}
		stack = append(stack[:depth-1], m[2])
		listed[strings.Join(stack, "/")] = n
	}
	if len(listed) == 0 {
		t.Fatal("docs/design.md: found no package under internal/ in the code block of ## Layout")
	}
	have := map[string]bool{}
	for _, p := range g.mod {
		if rel, ok := strings.CutPrefix(p.ImportPath, module+"/internal/"); ok {
			have[rel] = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(have)) {
		if _, ok := listed[p]; !ok {
			t.Errorf("internal/%s is not in docs/design.md's layout (## Layout): add a line with its one-line job under its parent", p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(listed)) {
		if !have[p] {
			t.Errorf("docs/design.md:%d: the layout names internal/%s, which is no package: remove or rename it", listed[p], p)
		}
	}
}
