package client

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestEveryWireTypeAliased: every exported type of internal/api has its
// alias in types.go, so a program outside the module can name each body
// a call takes or answers.
func TestEveryWireTypeAliased(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	here := filepath.Dir(self)
	apiDir := filepath.Join(here, "..", "internal", "api")
	exported := func(dir string, alias bool) map[string]bool {
		fset := token.NewFileSet()
		out := map[string]bool{}
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.TYPE {
					continue
				}
				for _, s := range g.Specs {
					ts := s.(*ast.TypeSpec)
					if ts.Name.IsExported() && (!alias || ts.Assign.IsValid()) {
						out[ts.Name.Name] = true
					}
				}
			}
		}
		return out
	}
	types, aliases := exported(apiDir, false), exported(here, true)
	if len(types) == 0 {
		t.Fatalf("no types found in %s", apiDir)
	}
	for n := range types {
		if !aliases[n] {
			t.Errorf("internal/api.%s has no alias in the client package: add `%s = api.%s` to types.go", n, n, n)
		}
	}
}
