package server

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// goroutine this package starts has an owner that stops it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
