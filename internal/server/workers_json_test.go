package server

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/api"
)

// No time a worker could make the pool hold fails GET /v1/workers's JSON
// (issue 18 finding 8: a start time of MinInt64 ms answered 500).
func TestJSONTimeEncodes(t *testing.T) {
	for _, in := range []time.Time{time.UnixMilli(math.MinInt64), time.UnixMilli(math.MaxInt64), time.Unix(0, 0), {}, time.Now()} {
		if _, err := json.Marshal(api.Worker{Started: jsonTime(in), LastHeartbeat: jsonTime(in)}); err != nil {
			t.Errorf("%v: %v", in, err)
		}
	}
	if now := time.Now(); !jsonTime(now).Equal(now) {
		t.Error("a sane time was changed")
	}
}
