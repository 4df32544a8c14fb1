package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Arrival processes.
const (
	Constant = "constant"
	Poisson  = "poisson"
)

// Schedule yields the intended send times of an open-loop arrival process,
// as offsets from the start of the run. It is not safe for concurrent use.
type Schedule struct {
	kind string
	rate float64
	rng  *rand.Rand
	i    int64
	t    float64 // seconds, the last offset (poisson)
}

// NewSchedule returns the arrival process kind ("constant" or "poisson") at
// rate arrivals per second. Constant arrivals are i/rate; poisson arrivals
// have exponential gaps of mean 1/rate drawn from a generator seeded by seed,
// so the same seed gives the same schedule.
func NewSchedule(kind string, rate float64, seed int64) (*Schedule, error) {
	if !(rate > 0) || rate > MaxRate {
		return nil, fmt.Errorf("rate must be above 0 and at most %g requests/s, got %g", float64(MaxRate), rate)
	}
	switch kind {
	case "", Constant:
		kind = Constant
	case Poisson:
	default:
		return nil, fmt.Errorf("unknown arrival process %q (use constant or poisson)", kind)
	}
	return &Schedule{kind: kind, rate: rate, rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed_b0a7))}, nil
}

// Next returns the offset of the next arrival from the start of the run.
// Offsets never decrease.
func (s *Schedule) Next() time.Duration {
	if s.kind == Constant {
		d := time.Duration(math.Round(float64(s.i) * float64(time.Second) / s.rate))
		s.i++
		return d
	}
	s.t += s.rng.ExpFloat64() / s.rate
	return time.Duration(math.Round(s.t * float64(time.Second)))
}
