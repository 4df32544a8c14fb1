package synthetic

import (
	"context"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

// This test binary never calls AllowExit (only the helper process of
// TestExitEveryKillsOnTheNthCall does), so Load must refuse exitEvery.
func TestExitEveryRefusedOutsideAWorker(t *testing.T) {
	r, err := runtime.Lookup("synthetic")
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Load(context.Background(), runtime.Spec{Name: "crashy@1"}, []byte(`{"exitEvery": 3}`))
	want := "synthetic: crashy@1: exitEvery kills the process that runs the model; it is only allowed in a worker process (sluice serve --workers N)"
	if err == nil || err.Error() != want {
		t.Fatalf("Load = %v, want %q", err, want)
	}
	if _, err := New(Cost{Mode: ModeSpin, ExitEvery: 1}, runtime.Spec{Name: "crashy@1"}); err == nil || !strings.Contains(err.Error(), "only allowed in a worker process") {
		t.Fatalf("New = %v, want the same refusal", err)
	}
	// Without exitEvery nothing changes.
	if _, err := r.Load(context.Background(), runtime.Spec{Name: "calm@1"}, []byte(`{"panicEvery": 3}`)); err != nil {
		t.Fatal(err)
	}
}
