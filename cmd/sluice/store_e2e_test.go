package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A store file truncated to nothing stops the server with a message naming
// the file and the fix; --init-store moves it aside and starts afresh.
func TestServeRefusesTruncatedStore(t *testing.T) {
	for _, file := range []string{"sluice.db", "records.db"} {
		t.Run(file, func(t *testing.T) {
			data := t.TempDir()
			models := t.TempDir()
			writePackage(t, filepath.Join(models, "calc"), []float64{1, 2}, 3.5)
			srv := startServer(t, "--data", data, "--models", models)
			if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@1" {
				t.Fatalf("predict: %+v", p)
			}
			srv.stop(t)
			path := filepath.Join(data, file)
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			_, stderr, err := sluice(t, "serve", "--addr", "127.0.0.1:0", "--data", data, "--models", models)
			if err == nil || !strings.Contains(stderr, path) || !strings.Contains(stderr, "--init-store") {
				t.Fatalf("serve on a truncated %s: %v; want a refusal naming %s and --init-store, got:\n%s", file, err, path, stderr)
			}
			srv = startServer(t, "--data", data, "--models", models, "--init-store")
			if !strings.Contains(srv.logs.String(), "moved aside") {
				t.Errorf("--init-store did not log the move:\n%s", srv.logs)
			}
			if p := predict(t, srv.url, `{"x":1,"z":2}`); p.ModelVersion != "calc@1" {
				t.Errorf("predict after --init-store: %+v", p)
			}
			srv.stop(t)
			aside, _ := filepath.Glob(path + ".damaged-*")
			if len(aside) != 1 {
				t.Errorf("the damaged file was not kept beside %s: %v", path, aside)
			}
		})
	}
}
