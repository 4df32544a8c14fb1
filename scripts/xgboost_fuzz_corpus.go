//go:build ignore

// Command xgboost_fuzz_corpus writes the committed seed corpus of the xgboost
// runtime's FuzzLoad target from the small real models in its testdata:
//
//	go run scripts/xgboost_fuzz_corpus.go
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	td := filepath.Join("internal", "runtime", "xgboost", "testdata")
	out := filepath.Join(td, "fuzz", "FuzzLoad")
	if err := os.MkdirAll(out, 0o755); err != nil {
		log.Fatal(err)
	}
	write := func(name string, b []byte) {
		s := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(out, name), []byte(s), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	for _, name := range []string{"tiny_binary.json", "tiny_binary.ubj", "tiny_softprob.json", "tiny_softprob.ubj", "cat_dart.json", "cat_dart.ubj"} {
		b, err := os.ReadFile(filepath.Join(td, name))
		if err != nil {
			log.Fatal(err)
		}
		seed := strings.ReplaceAll(name, ".", "_")
		write(seed, b)
		write(seed+"_truncated", b[:len(b)*2/3])
	}
	bj, err := os.ReadFile(filepath.Join(td, "tiny_binary.json"))
	if err != nil {
		log.Fatal(err)
	}
	write("dart_json", []byte(strings.Replace(string(bj), `"name":"gbtree"`, `"name":"dart"`, 1)))
	write("cycle_json", []byte(strings.Replace(string(bj), `"left_children":[1,`, `"left_children":[0,`, 1)))
}
