package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goClientProgram is a user's program: it knows the public client
// package and nothing else of Sluice.
const goClientProgram = `package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sluiceml/sluice/client"
)

func main() {
	c := client.New(os.Args[1])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var models []client.Model // the wire types under the client's names
	models, err := c.Models(ctx)
	if err != nil {
		fmt.Println("models:", err)
		os.Exit(1)
	}
	for _, m := range models {
		fmt.Println("model", m.Name)
	}
	p, err := c.PredictRaw(ctx, "iris", 0, []byte(` + "`" + `{"instances":[{"sepalLength":5.1,"sepalWidth":3.5,"petalLength":1.4,"petalWidth":0.2}]}` + "`" + `), "outside-1")
	if err != nil {
		fmt.Println("predict:", err)
		os.Exit(1)
	}
	fmt.Println("predict", p.Status, p.Header.Get("X-Request-Id"), string(p.Body))
	_, err = c.Predict(ctx, "nosuchmodel", 0, []byte(` + "`" + `{"instances":[{}]}` + "`" + `))
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println("error", e.Status, e.Detail.Code)
	}
}
`

// TestGoClientFromAnotherModule: a program in a module of its own, as a
// user's would be (go.mod requiring github.com/sluiceml/sluice, replaced
// by this tree), imports the public client package, which Go refuses for
// an internal one, and drives a real sluice serve with it (through the
// validating proxy: its answers are checked against docs/openapi.yaml).
func TestGoClientFromAnotherModule(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--data", t.TempDir())
	dir := t.TempDir()
	mod := "module example.com/sluiceuser\n\ngo 1.26\n\nrequire github.com/sluiceml/sluice v0.0.0\n\nreplace github.com/sluiceml/sluice => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "main.go": []byte(goClientProgram)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", viaProxy([]string{"run", ".", srv.url})...)
	cmd.Dir = dir
	// Offline: every module it needs is in the module cache already (this
	// tree was built from it).
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run the outside program: %v\n%s", err, out)
	}
	for _, want := range []string{"model fraud\n", "model iris\n", `predict 200 outside-1 {"predictions":[{"setosa":0.9531188`, `"modelVersion":"iris@1"`, "error 404 not_found\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the outside program's output lacks %q:\n%s", want, out)
		}
	}
}
