package modelpkg_test

import (
	"reflect"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sluiceml/sluice/internal/modelpkg"
)

// Packages accepts a single package folder as well as a folder of packages.
func TestPackages(t *testing.T) {
	file := &fstest.MapFile{Data: []byte("name: x\n")}
	for _, tc := range []struct {
		name string
		fsys fstest.MapFS
		root string
		want []string
	}{
		{"folder of packages", fstest.MapFS{"b/model.yaml": file, "a/model.yaml": file, "notes/readme.txt": file}, ".", []string{"a", "b"}},
		{"single package at the root", fstest.MapFS{"model.yaml": file, "model.json": file}, ".", []string{"."}},
		{"single package in a subfolder", fstest.MapFS{"fraud/model.yaml": file, "fraud/sub/model.yaml": file}, "fraud", []string{"fraud"}},
		{"folder holding none", fstest.MapFS{"readme.txt": file, "empty/x.txt": file}, ".", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := modelpkg.Packages(tc.fsys, tc.root)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Packages = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNameOf(t *testing.T) {
	for _, tc := range []struct{ manifest, want string }{
		{"name: fraud\nruntime: xgboost\nserving: {replicas: nope}\n", "fraud"},
		{"name: Fraud!\n", ""},
		{"runtime: linear\n", ""},
		{"name: [unclosed\n", ""},
	} {
		if got := modelpkg.NameOf([]byte(tc.manifest)); got != tc.want {
			t.Errorf("NameOf(%q) = %q, want %q", tc.manifest, got, tc.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	base := func() fstest.MapFS {
		return fstest.MapFS{"p/model.yaml": {Data: []byte("name: p\n"), ModTime: t0}, "p/m.json": {Data: []byte("{}"), ModTime: t0}, "q/model.yaml": {Data: []byte("x"), ModTime: t0}}
	}
	fp := func(fsys fstest.MapFS) string {
		t.Helper()
		s, err := modelpkg.Fingerprint(fsys, "p")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := fp(base())
	other := base()
	other["q/model.yaml"] = &fstest.MapFile{Data: []byte("changed"), ModTime: t0.Add(time.Hour)}
	if fp(other) != want {
		t.Error("a change in another package changed the fingerprint")
	}
	for name, change := range map[string]func(fstest.MapFS){
		"rewritten": func(f fstest.MapFS) {
			f["p/m.json"] = &fstest.MapFile{Data: []byte("{}"), ModTime: t0.Add(time.Second)}
		},
		"resized": func(f fstest.MapFS) { f["p/m.json"] = &fstest.MapFile{Data: []byte("{ }"), ModTime: t0} },
		"added":   func(f fstest.MapFS) { f["p/ref.jsonl"] = &fstest.MapFile{Data: []byte("{}"), ModTime: t0} },
		"removed": func(f fstest.MapFS) { delete(f, "p/m.json") },
	} {
		f := base()
		change(f)
		if fp(f) == want {
			t.Errorf("%s: fingerprint unchanged", name)
		}
	}
	if _, err := modelpkg.Fingerprint(base(), "gone"); err == nil {
		t.Error("a missing folder has a fingerprint")
	}
}
