package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MaxSweepPoints bounds the number of rates in a sweep.
const MaxSweepPoints = 200

// ParseSweep parses "start:end:step" (requests/s) into the rates start,
// start+step, ... up to and including end.
func ParseSweep(s string) ([]float64, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("sweep %q: want start:end:step, e.g. 200:1000:100 (requests/s)", s)
	}
	names := []string{"start", "end", "step"}
	var v [3]float64
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("sweep %q: %s %q is not a number", s, names[i], p)
		}
		v[i] = f
	}
	start, end, step := v[0], v[1], v[2]
	switch {
	case start <= 0:
		return nil, fmt.Errorf("sweep %q: start must be above 0 requests/s, got %g", s, start)
	case end < start:
		return nil, fmt.Errorf("sweep %q: end (%g) must not be below start (%g)", s, end, start)
	case end > MaxRate:
		return nil, fmt.Errorf("sweep %q: end must be at most %d requests/s, got %g", s, MaxRate, end)
	case step <= 0:
		return nil, fmt.Errorf("sweep %q: step must be above 0, got %g", s, step)
	}
	n := math.Floor((end-start)/step+1e-9) + 1
	if n > MaxSweepPoints {
		return nil, fmt.Errorf("sweep %q: %.0f rates, at most %d are allowed; use a larger step", s, n, MaxSweepPoints)
	}
	rates := make([]float64, 0, int(n))
	for i := 0; i < int(n); i++ {
		// Multiply rather than accumulate, so 0.1 steps do not drift.
		rates = append(rates, math.Round((start+float64(i)*step)*1e6)/1e6)
	}
	return rates, nil
}

// RunSweep runs cfg at each rate in turn (cfg.Rate is ignored), each for
// cfg.Duration. The payload is prepared once. progress, when set, is called
// after each rate. If ctx ends, the results so far are returned, the last
// one marked Interrupted.
func RunSweep(ctx context.Context, cfg Config, rates []float64, progress func(Result)) ([]Result, error) {
	if len(rates) == 0 {
		return nil, fmt.Errorf("bench: sweep has no rates")
	}
	for _, r := range rates {
		c := cfg
		c.Rate = r
		if err := c.check(); err != nil {
			return nil, err
		}
	}
	cfg.Rate = slices.Max(rates) // sizes the body pool
	if err := cfg.check(); err != nil {
		return nil, err
	}
	client := newClient(cfg)
	defer client.CloseIdleConnections()
	p, err := preparePayloads(ctx, client, cfg)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, r := range rates {
		if ctx.Err() != nil {
			break
		}
		c := cfg
		c.Rate = r
		res := run(ctx, client, c, p)
		out = append(out, res)
		if progress != nil {
			progress(res)
		}
		if res.Interrupted {
			break
		}
		// Start each rate from a clean slate of connections.
		client.CloseIdleConnections()
	}
	return out, nil
}
