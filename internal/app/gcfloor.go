package app

import (
	"log/slog"
	"os"

	"github.com/sluiceml/sluice/internal/gcfloor"
)

// StartGCFloor starts the GC floor at n bytes (0: off) and logs what it
// did. Its Stop is safe on the nil it returns when off.
func StartGCFloor(n int64, log *slog.Logger) *gcfloor.Tuner {
	t := gcfloor.Start(n)
	switch {
	case n == 0:
	case t == nil:
		log.Info("GC floor off: GOGC is set in the environment", "gogc", os.Getenv("GOGC"))
	default:
		log.Info("GC floor on", "gc_floor_mb", n>>20) // the GOGC it sets: go_gc_gogc_percent
	}
	return t
}
