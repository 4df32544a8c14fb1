package errs

import "testing"

// Every code has a row in both columns of the table.
func TestEveryCodeHasAGRPCCode(t *testing.T) {
	for _, c := range Codes() {
		if _, ok := grpcOf[c]; !ok {
			t.Errorf("code %s has an HTTP status but no gRPC code", c)
		}
	}
	if len(grpcOf) != len(statusOf) {
		t.Errorf("%d gRPC rows, %d HTTP rows", len(grpcOf), len(statusOf))
	}
}
