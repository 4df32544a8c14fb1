package modelpkg_test

import (
	"reflect"
	"testing"
	"testing/fstest"

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
