package server

import (
	"testing"

	"github.com/sluiceml/sluice/internal/oip/clienttest"
)

// TestClientFixtures replays what tritonclient (http and grpc) and the
// KServe SDK send for each ordinary call against the real REST handler
// and gRPC server, in the order of the files (an id reused by a later
// call is another request, not a replay), and checks each answer is the
// one that client reads as success.
func TestClientFixtures(t *testing.T) {
	c, _, url := newGRPC(t)
	works, all := clienttest.ReplayAll(t, "../oip/testdata/clients", url, c)
	t.Logf("ordinary client calls that work: %d of %d", works, all)
}
