package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/sluiceml/sluice/internal/bytesize"
	"github.com/sluiceml/sluice/internal/gcfloor"
)

// defaultGCFloor is serve's --gc-floor default. A worker's is off: its
// versions may fill its memory budget outside the Go heap (ONNX Runtime's
// arenas), and on Kubernetes its pod leaves the process itself only
// memoryReserve (64Mi) beyond that budget, which a floor's garbage could
// take. A worker gets a floor when asked (sluice worker --gc-floor, or
// sluice serve --gc-floor set explicitly, which is passed to --workers).
const defaultGCFloor = "64MiB"

// gcFloorHelp is --gc-floor's help, shared by serve and worker.
const gcFloorHelp = "keep the Go heap's collection target at least this size while the live heap is small (GOGC set after every collection; at most this much garbage is kept; 0 turns it off; GOGC in the environment wins). Spares a gateway with small models collecting dozens of times a second"

// startGCFloor starts the GC floor --gc-floor asks for ("0" or "0MiB":
// off). Its Stop is safe on the nil it returns when off.
func startGCFloor(flag string, log *slog.Logger) (*gcfloor.Tuner, error) {
	var n int64
	if flag != "0" {
		var err error
		if n, err = bytesize.Parse(flag); err != nil {
			return nil, fmt.Errorf("--gc-floor %q: %v (0 turns the floor off)", flag, err)
		}
	}
	t := gcfloor.Start(n)
	switch {
	case n == 0:
	case t == nil:
		log.Info("GC floor off: GOGC is set in the environment", "gogc", os.Getenv("GOGC"))
	default:
		log.Info("GC floor on", "gc_floor_mb", n>>20) // the GOGC it sets: go_gc_gogc_percent
	}
	return t, nil
}
