//go:build !cgo

package onnx

import (
	"context"
	"errors"

	"github.com/sluiceml/sluice/internal/runtime"
)

// Available reports whether this build can run ONNX models (it has cgo).
const Available = false

// ErrNotAvailable is what loading an ONNX model returns in a build without cgo.
var ErrNotAvailable = errors.New("onnx runtime not available in this build (it was built with CGO_ENABLED=0; ONNX Runtime needs cgo: rebuild with CGO_ENABLED=1)")

// LibraryInfo returns "", "": this build never loads ONNX Runtime.
func LibraryInfo() (path, version string) { return "", "" }

// Load fails: ONNX Runtime needs cgo.
func (Runtime) Load(context.Context, runtime.Spec, []byte) (runtime.Model, error) {
	return nil, ErrNotAvailable
}
