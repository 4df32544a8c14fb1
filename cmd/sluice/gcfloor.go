package main

import (
	"fmt"

	"github.com/sluiceml/sluice/internal/bytesize"
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

// parseGCFloor reads --gc-floor ("0" or "0MiB": off) in bytes.
func parseGCFloor(flag string) (int64, error) {
	if flag == "0" {
		return 0, nil
	}
	n, err := bytesize.Parse(flag)
	if err != nil {
		return 0, fmt.Errorf("--gc-floor %q: %v (0 turns the floor off)", flag, err)
	}
	return n, nil
}
