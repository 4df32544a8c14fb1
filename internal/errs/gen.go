//go:build ignore

// gen writes catalogue_gen.go and docs/errors.md from catalogue.tsv
// (`go generate ./internal/errs`; `go test ./internal/errs -update` does
// the same).
package main

import (
	"fmt"
	"os"

	"github.com/sluiceml/sluice/internal/errs/internal/catgen"
)

func main() {
	src, err := os.ReadFile(catgen.Source)
	if err == nil {
		var goSrc, docs []byte
		if goSrc, docs, err = catgen.Generate(src); err == nil {
			if err = os.WriteFile(catgen.GoFile, goSrc, 0o644); err == nil {
				err = os.WriteFile(catgen.Docs, docs, 0o644)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
