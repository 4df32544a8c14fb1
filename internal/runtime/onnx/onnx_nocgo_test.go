//go:build !cgo

package onnx

import (
	"context"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/runtime"
)

func TestNotAvailableWithoutCgo(t *testing.T) {
	rt, err := runtime.Lookup("onnx")
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Load(context.Background(), runtime.Spec{Name: "mlp@1", Features: 30, Outputs: 1}, readFixture(t, "mlp"))
	if err == nil || !strings.Contains(err.Error(), "onnx runtime not available in this build") {
		t.Fatalf("Load without cgo: %v", err)
	}
}
