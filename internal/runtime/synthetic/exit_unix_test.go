//go:build unix

package synthetic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

const helperEnv = "SLUICE_SYNTHETIC_EXIT_HELPER"

// TestExitEveryKillsOnTheNthCall runs TestExitHelperProcess in a child
// process and checks that it died of SIGKILL on exactly the 3rd call of the
// version, counted across its two replicas, with nothing after it run.
func TestExitEveryKillsOnTheNthCall(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestExitHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("helper process: err %v, want it killed; output:\n%s", err, out.String())
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper process ended with %v, want killed by SIGKILL; output:\n%s", ee, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"loaded", "call 1", "ok 1", "call 2", "ok 2", "call 3"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("helper output %q, want %q: it must die on the 3rd call, not before or after", lines, want)
	}
}

// TestExitHelperProcess is not a test: it is the child process of
// TestExitEveryKillsOnTheNthCall. Lines go to stdout unbuffered, so the
// parent sees how far it got.
func TestExitHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestExitEveryKillsOnTheNthCall")
	}
	AllowExit()
	r, err := runtime.Lookup("synthetic")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	spec := runtime.Spec{Name: "crashy@1"}
	var replicas []runtime.Model
	for range 2 {
		m, err := r.Load(context.Background(), spec, []byte(`{"exitEvery": 3}`))
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		replicas = append(replicas, m)
	}
	// Another version's calls do not count towards crashy@1's.
	other, err := r.Load(context.Background(), runtime.Spec{Name: "other@1"}, []byte(`{"exitEvery": 3}`))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("loaded")
	in := runtime.Batch{Rows: 1, Cols: 1, Data: []float32{1}}
	for call := 1; call <= 5; call++ {
		if call == 2 {
			for range 2 {
				if _, err := other.Predict(context.Background(), in); err != nil {
					fmt.Println(err)
				}
			}
		}
		fmt.Printf("call %d\n", call)
		if _, err := replicas[call%2].Predict(context.Background(), in); err != nil {
			fmt.Println(err)
		}
		fmt.Printf("ok %d\n", call)
	}
	fmt.Println("survived")
	os.Exit(0)
}
