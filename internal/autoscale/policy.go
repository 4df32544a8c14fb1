// Package autoscale decides how many replicas a model version should have
// from what its traffic and its cost model say: a pure policy (Desired, and
// the capacity formula Plan) and a loop (Loop) that reads signals and asks
// an actuator for the count. It never loads, places or drains a replica
// itself; the actuator does.
package autoscale

import (
	"fmt"
	"math"
	"time"

	"github.com/sluiceml/sluice/internal/serving"
)

// Defaults of Config. TargetUtilisation is the design documents' figure.
const (
	DefaultTargetUtilisation = 0.7
	DefaultHysteresis        = 0.1 // ±10 % around the target: hold
	DefaultCooldown          = time.Minute
	DefaultSmoothing         = 20 * time.Second
	DefaultIdleAfter         = 5 * time.Minute
	DefaultQueueDrain        = 5 * time.Second
	// DefaultRefusalShare is the share of a tick's arrivals that must be
	// refused or miss their deadline before that alone forces a step up:
	// below it, a client that sends deadlines no replica could meet does
	// not drive the version to maxReplicas.
	DefaultRefusalShare = 0.01
)

// Config is one version's autoscaling settings. Zero fields take the
// defaults above (MinReplicas 0 is a real value: a cold tier).
type Config struct {
	MinReplicas int
	MaxReplicas int // 0: no limit but the budget
	// SLO is the latency objective of a request. A batch must fit in half
	// of it (a request may wait for the batch being computed, then its own
	// batch), which bounds the batch size the per-replica figure assumes.
	SLO      time.Duration
	MaxBatch int // serving.maxBatchSize (0: 1)
	// TargetUtilisation is the share of a replica's throughput at the SLO
	// that the policy plans to use (0.7).
	TargetUtilisation float64
	// Hysteresis: scale up only when the current replicas would run above
	// target×(1+h), down only when one replica fewer would run at or below
	// target×(1−h).
	Hysteresis float64
	// Cooldown is how long the desired count must stay below the current
	// one before one replica is removed; each further step waits another
	// cooldown.
	Cooldown time.Duration
	// Smoothing is the time constant of the arrival rate's EWMA and of its
	// slope.
	Smoothing time.Duration
	// IdleAfter: with MinReplicas 0, the last replica goes only after no
	// instance arrived and none was queued for this long.
	IdleAfter time.Duration
	// QueueDrain: queued instances add queued/QueueDrain to the rate to
	// plan for, so a backlog is cleared in about that time.
	QueueDrain   time.Duration
	RefusalShare float64
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.TargetUtilisation <= 0 || c.TargetUtilisation > 1 {
		c.TargetUtilisation = DefaultTargetUtilisation
	}
	if c.Hysteresis <= 0 {
		c.Hysteresis = DefaultHysteresis
	}
	if c.Cooldown <= 0 {
		c.Cooldown = DefaultCooldown
	}
	if c.Smoothing <= 0 {
		c.Smoothing = DefaultSmoothing
	}
	if c.IdleAfter <= 0 {
		c.IdleAfter = DefaultIdleAfter
	}
	if c.QueueDrain <= 0 {
		c.QueueDrain = DefaultQueueDrain
	}
	if c.RefusalShare <= 0 {
		c.RefusalShare = DefaultRefusalShare
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 1
	}
	if c.MinReplicas < 0 {
		c.MinReplicas = 0
	}
	return c
}

// Signals is what one tick observed of a version. Counts are since the
// previous tick.
type Signals struct {
	Now     time.Time
	Arrived int64 // instances that arrived (admitted and refused)
	Refused int64 // instances refused at admission (queue_full, deadline_infeasible, not_ready)
	Missed  int64 // instances whose deadline passed in the queue or in flight
	Queued  int   // instances queued now
	// Replicas is the count the version has now (ready and loading, not
	// draining). The policy reads it on its first tick only; after that it
	// reasons from its own target (the loop makes the target happen).
	Replicas int
	// PerReplica is a measured throughput of one replica at the SLO, in
	// instances/s; 0: derive it from Cost.
	PerReplica float64
	Cost       serving.CostModel // the version's learned cost model
	// ColdStart is the measured time from asking for a replica to its
	// taking traffic (load + golden + warmup): how far ahead the rate is
	// projected along its slope.
	ColdStart time.Duration
	// Budget is the most replicas of this version the workers' memory can
	// hold (its current ones included); 0: no figure, no cap.
	Budget int
}

// State is what the policy carries from one tick to the next. The zero
// State is a version never seen.
type State struct {
	Last       time.Time // previous tick; zero: none yet
	Rate       float64   // smoothed arrival rate, instances/s (Holt level)
	Slope      float64   // its smoothed slope, instances/s per second (Holt trend)
	Seeded     bool      // Rate holds a measured rate
	Target     int       // the replica count last decided
	LowSince   time.Time // since when the desired count has stayed below Target; zero: it has not
	LastActive time.Time // last tick with arrivals or queued work
}

// Decision is one tick's outcome. Replicas is the count to have; the
// figures say why.
type Decision struct {
	Replicas   int
	Reason     string
	Rate       float64 // smoothed arrival rate, instances/s
	Predicted  float64 // rate planned for: smoothed + slope × cold start (+ backlog, + overload)
	PerReplica float64 // instances/s one replica serves within the SLO
	Raw        int     // ceil(Predicted / (PerReplica × target)), before hysteresis, cooldown and clamps
}

// Throughput is what one replica serves within the SLO according to the
// cost model A + B·n: the largest batch n ≤ maxBatch whose time fits
// slo/2 runs n instances every A + B·n. It returns the rate in instances/s
// and n. When even a batch of one does not fit, n is 1 (the SLO cannot be
// met, the figure is still what one replica does). A zero cost model or
// SLO gives 0: no figure.
func Throughput(c serving.CostModel, maxBatch int, slo time.Duration) (float64, int) {
	if c.A+c.B <= 0 || slo <= 0 {
		return 0, 0
	}
	if maxBatch <= 0 {
		maxBatch = 1
	}
	budget := slo / 2
	n := maxBatch
	if c.B > 0 {
		n = min(n, int((budget-c.A)/c.B))
	} else if c.A > budget {
		n = 0
	}
	n = max(n, 1)
	return float64(n) / c.Batch(n).Seconds(), n
}

// Desired is the autoscaling policy: a pure function of the settings, one
// tick's signals and the state the previous tick left. Rules, in order:
//
//  1. The arrival rate is smoothed (Holt: an EWMA of the level and of its
//     slope, time constant Smoothing); the rate planned for is the level
//     plus a rising slope × ColdStart, plus queued/QueueDrain, and at least
//     the last tick's raw rate when that is more than the current replicas
//     can serve at all (a surge is sized at once, not after the EWMA).
//  2. raw = ceil(planned / (perReplica × TargetUtilisation)).
//  3. Up, at once and by as much as needed, when the current replicas
//     would run above target × (1 + Hysteresis).
//  4. Refusals or deadline misses above RefusalShare of the arrivals, or
//     arrivals with no replica, force at least one more replica whatever
//     the rate estimate says.
//  5. Down by one replica only after raw has stayed below the current
//     count, with one replica fewer at or below target × (1 − Hysteresis),
//     for a whole Cooldown; each further step waits another Cooldown.
//     With nothing to go on (no throughput figure), it holds.
//  6. The last replica (MinReplicas 0) goes only after IdleAfter without
//     arrivals or queued work.
//  7. The result is clamped to MinReplicas..min(MaxReplicas, Budget);
//     clamps apply at once.
func Desired(cfg Config, in Signals, st State) (Decision, State) {
	cfg = cfg.WithDefaults()
	ceiling := cfg.MaxReplicas
	if in.Budget > 0 && (ceiling <= 0 || in.Budget < ceiling) {
		ceiling = in.Budget
	}
	clamp := func(n int) int {
		if ceiling > 0 {
			n = min(n, ceiling)
		}
		return max(n, cfg.MinReplicas, 0)
	}
	if in.Arrived > 0 || in.Queued > 0 {
		st.LastActive = in.Now
	}

	first := st.Last.IsZero()
	dt := in.Now.Sub(st.Last).Seconds()
	if first || dt <= 0 {
		if first {
			st.Target = in.Replicas
			st.LastActive = in.Now
		}
		st.Last = in.Now
		n := clamp(st.Target)
		why := "first tick: holding the current count"
		if !first {
			why = "no time since the last tick: holding"
		}
		if n != st.Target {
			why = fmt.Sprintf("clamped to %d (min %d, ceiling %d)", n, cfg.MinReplicas, ceiling)
			st.LowSince = time.Time{}
		}
		st.Target = n
		return Decision{Replicas: n, Reason: why, Rate: st.Rate}, st
	}

	// 1. Holt smoothing of the rate.
	raw := float64(in.Arrived) / dt
	a := 1 - math.Exp(-dt/cfg.Smoothing.Seconds())
	level := raw // the first rate seeds the level: no ramp up from zero
	if st.Seeded {
		prev := st.Rate
		level = st.Rate + st.Slope*dt
		level += a * (raw - level)
		level = max(level, 0)
		st.Slope += a * ((level-prev)/dt - st.Slope)
	}
	st.Rate, st.Seeded = level, true
	st.Last = in.Now

	cur := st.Target
	per := in.PerReplica
	if per <= 0 {
		per, _ = Throughput(in.Cost, cfg.MaxBatch, cfg.SLO)
	}
	d := Decision{Rate: level, PerReplica: per}

	planned := level + max(st.Slope, 0)*in.ColdStart.Seconds() + float64(in.Queued)/cfg.QueueDrain.Seconds()
	surge := per > 0 && raw > float64(cur)*per
	if surge {
		planned = max(planned, raw+float64(in.Queued)/cfg.QueueDrain.Seconds())
	}
	d.Predicted = planned

	want, why := cur, "holding"
	if per > 0 {
		d.Raw = int(math.Ceil(planned / (per * cfg.TargetUtilisation)))
		util := math.Inf(1)
		if cur > 0 {
			util = planned / (float64(cur) * per)
		}
		below := math.Inf(1)
		if cur > 1 {
			below = planned / (float64(cur-1) * per)
		}
		switch {
		case d.Raw > cur && util > cfg.TargetUtilisation*(1+cfg.Hysteresis) && planned > 0:
			want = d.Raw
			why = fmt.Sprintf("up: %.1f instances/s planned (smoothed %.1f, slope %+.2f/s) needs %d replicas of %.1f/s at %.0f%%", planned, level, st.Slope, d.Raw, per, 100*cfg.TargetUtilisation)
			if surge {
				why = fmt.Sprintf("up: surge of %.1f instances/s over %d replicas of %.1f/s needs %d at %.0f%%", raw, cur, per, d.Raw, 100*cfg.TargetUtilisation)
			}
		case d.Raw < cur && cur > 1 && below <= cfg.TargetUtilisation*(1-cfg.Hysteresis):
			want = cur - 1
			why = fmt.Sprintf("down: %.1f instances/s planned needs %d replicas of %.1f/s", planned, d.Raw, per)
		default:
			if d.Raw != cur {
				why = fmt.Sprintf("holding: %.1f instances/s planned needs %d replicas, within the hysteresis band of %d", planned, d.Raw, cur)
			} else {
				why = fmt.Sprintf("holding: %.1f instances/s planned needs %d replicas", planned, cur)
			}
		}
	} else {
		why = "holding: no throughput figure (no cost model and no measured per-replica rate)"
	}
	if cur == 1 && in.Arrived == 0 && in.Queued == 0 {
		want, why = 0, "down: no traffic"
	}
	if want < cur && cur <= cfg.MinReplicas {
		want, why = cur, fmt.Sprintf("holding at minReplicas %d", cfg.MinReplicas)
	}

	// 4. Refusals, misses and arrivals with no replica force up.
	bad := in.Refused + in.Missed
	if (bad > 0 && float64(bad) > cfg.RefusalShare*float64(in.Arrived)) || (cur == 0 && (in.Arrived > 0 || in.Queued > 0)) {
		if want <= cur {
			want = cur + 1
			switch {
			case cur == 0:
				why = fmt.Sprintf("up: %d instances arrived with no replica", in.Arrived)
			default:
				why = fmt.Sprintf("up: %d refused and %d missed of %d arrived since the last tick", in.Refused, in.Missed, in.Arrived)
			}
		}
	}

	// 5, 6. Down only after a cooldown (and, for the last one, idle).
	if want < cur {
		if st.LowSince.IsZero() {
			st.LowSince = in.Now
		}
		waited := in.Now.Sub(st.LowSince)
		switch {
		case waited < cfg.Cooldown:
			why = fmt.Sprintf("%s; waiting for the cooldown (%v of %v)", why, waited.Round(time.Second), cfg.Cooldown)
			want = cur
		case want == 0 && in.Now.Sub(st.LastActive) < cfg.IdleAfter:
			why = fmt.Sprintf("%s; the last replica stays until idle for %v", why, cfg.IdleAfter)
			want = cur
		default:
			want = cur - 1
			st.LowSince = in.Now // the next step waits a whole cooldown again
		}
	} else {
		st.LowSince = time.Time{}
	}

	// 7. Clamps.
	if n := clamp(want); n != want {
		why = fmt.Sprintf("%s; clamped to %d (min %d, ceiling %d)", why, n, cfg.MinReplicas, ceiling)
		want = n
	}
	if want > cur {
		st.LowSince = time.Time{}
	}
	st.Target = want
	d.Replicas, d.Reason = want, why
	return d, st
}
