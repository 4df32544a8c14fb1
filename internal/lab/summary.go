package lab

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/sluiceml/sluice/internal/bench"
)

// Num is a figure that may be missing (NaN): JSON null, an empty CSV cell.
type Num float64

// MarshalJSON renders NaN and infinities as null.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, math.Round(f*1000)/1000, 'f', -1, 64), nil
}

// UnmarshalJSON reads null as NaN.
func (n *Num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Num(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	*n = Num(f)
	return err
}

// Quantile is the nearest-rank q-quantile of xs (sorted or not): the
// smallest value with at least q of them at or below it; NaN for none.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	k := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(k, len(s)-1))]
}

// Tally is what a set of request outcomes adds up to, against an SLO.
type Tally struct {
	Sent     int `json:"sent"`
	OK       int `json:"ok"`       // 2xx
	Good     int `json:"good"`     // 2xx within the SLO
	Refused  int `json:"refused"`  // 429 and 503: the server decided not to compute it
	Late     int `json:"late"`     // 504: admitted, then its deadline passed
	NoAnswer int `json:"noAnswer"` // no HTTP answer (the client's timeout)
	P50Ms    Num `json:"p50Ms"`    // of the 2xx answers, from the intended send time
	P99Ms    Num `json:"p99Ms"`
	// RefusedP99Ms is the p99 of the refusals' latency: how fast a "no" is.
	RefusedP99Ms Num            `json:"refusedP99Ms"`
	ByCode       map[string]int `json:"byCode,omitempty"`
}

// TallyOf adds up outcomes; slo ≤ 0 counts every 2xx as good.
func TallyOf(os []bench.Outcome, slo time.Duration) Tally {
	t := Tally{ByCode: map[string]int{}}
	var ok, refused []float64
	for _, o := range os {
		t.Sent++
		ms := float64(o.Latency) / 1e6
		switch {
		case o.Status/100 == 2:
			t.OK++
			ok = append(ok, ms)
			if slo <= 0 || o.Latency <= slo {
				t.Good++
			}
		case o.Status == 429 || o.Status == 503:
			t.Refused++
			refused = append(refused, ms)
		case o.Status == 504:
			t.Late++
		case o.Status == 0:
			t.NoAnswer++
		}
		if o.Code != "" {
			t.ByCode[o.Code]++
		}
	}
	t.P50Ms, t.P99Ms = Num(Quantile(ok, 0.5)), Num(Quantile(ok, 0.99))
	t.RefusedP99Ms = Num(Quantile(refused, 0.99))
	return t
}

// Zipf draws ranks 1..N with P(k) ∝ 1/k^S, from its own seeded stream.
type Zipf struct {
	cdf []float64
	rng *rand.Rand
}

// NewZipf makes a Zipf chooser over n ranks (n ≥ 1, s > 0).
func NewZipf(n int, s float64, seed uint64) *Zipf {
	z := &Zipf{cdf: make([]float64, n), rng: rand.New(rand.NewPCG(seed, 0x21bf))}
	sum := 0.0
	for k := 1; k <= n; k++ {
		sum += math.Pow(float64(k), -s)
		z.cdf[k-1] = sum
	}
	for i := range z.cdf {
		z.cdf[i] /= sum
	}
	return z
}

// Share is the probability of rank k (1-based).
func (z *Zipf) Share(k int) float64 {
	if k < 1 || k > len(z.cdf) {
		return 0
	}
	if k == 1 {
		return z.cdf[0]
	}
	return z.cdf[k-1] - z.cdf[k-2]
}

// Draw returns the next rank.
func (z *Zipf) Draw() int {
	i, _ := slices.BinarySearch(z.cdf, z.rng.Float64())
	return min(i, len(z.cdf)-1) + 1
}

// Scrape is one reading of the server's counters (summed over every
// series of each name), At from the start of the load.
type Scrape struct {
	At          time.Duration
	Requests    float64 // sluice_requests_total
	Loads       float64 // sluice_worker_loads_total
	Evictions   float64 // sluice_evictions_total
	ColdWaited  float64 // sluice_cold_starts_total{outcome="waited"}
	ColdRefused float64 // sluice_cold_starts_total{outcome="refused"}
	MemoryUsed  float64 // sluice_worker_memory_used_bytes, all workers
}

// ManyWindow is one window of the many-models run.
type ManyWindow struct {
	FromS       float64 `json:"fromSeconds"`
	Sent        int     `json:"sent"`
	OK          int     `json:"ok"`
	ColdRefused int     `json:"coldRefused"` // answered 503 cold_start (client side)
	// HitRatio is 1 − cold starts / requests over the window, both the
	// server's counters (NaN when no scrape covers it).
	HitRatio  Num     `json:"hitRatio"`
	Loads     float64 `json:"loads"`
	Evictions float64 `json:"evictions"`
	MemoryMiB Num     `json:"memoryUsedMiB"` // at the window's end
	HotP99Ms  Num     `json:"hotP99Ms"`      // 2xx of the hottest models
	AllP99Ms  Num     `json:"allP99Ms"`      // every 2xx
}

// Windows cuts a many-models run into windows of w: outcomes by their
// intended send time, counters by the scrapes at the windows' edges
// (the scrape nearest to each edge). hot says which models are
// the hottest.
func Windows(os []bench.Outcome, scrapes []Scrape, w, total time.Duration, hot func(model string) bool) []ManyWindow {
	if w <= 0 || total <= 0 {
		return nil
	}
	n := int(total / w)
	if total-time.Duration(n)*w > w/100 { // a last, partial window
		n++
	}
	out := make([]ManyWindow, n)
	hotLat := make([][]float64, n)
	allLat := make([][]float64, n)
	for i := range out {
		out[i].FromS = (time.Duration(i) * w).Seconds()
		out[i].HitRatio = Num(math.NaN())
	}
	for _, o := range os {
		i := int(o.At / w)
		if i < 0 || i >= n {
			continue
		}
		out[i].Sent++
		switch {
		case o.Status/100 == 2:
			out[i].OK++
			ms := float64(o.Latency) / 1e6
			allLat[i] = append(allLat[i], ms)
			if hot(o.Model) {
				hotLat[i] = append(hotLat[i], ms)
			}
		case o.Code == "cold_start":
			out[i].ColdRefused++
		}
	}
	at := func(t time.Duration) (Scrape, bool) { // the scrape nearest to t
		var s Scrape
		found := false
		for _, x := range scrapes {
			if !found || (x.At-t).Abs() < (s.At-t).Abs() {
				s, found = x, true
			}
		}
		return s, found
	}
	for i := range out {
		out[i].HotP99Ms = Num(Quantile(hotLat[i], 0.99))
		out[i].AllP99Ms = Num(Quantile(allLat[i], 0.99))
		a, okA := at(time.Duration(i) * w)
		b, okB := at(time.Duration(i+1) * w)
		if i == n-1 && len(scrapes) > 0 { // the last window ends with the last scrape
			b, okB = scrapes[len(scrapes)-1], true
		}
		if !okA || !okB || b.At <= a.At {
			out[i].MemoryMiB = Num(math.NaN())
			continue
		}
		out[i].Loads = b.Loads - a.Loads
		out[i].Evictions = b.Evictions - a.Evictions
		out[i].MemoryMiB = Num(b.MemoryUsed / (1 << 20))
		if req := b.Requests - a.Requests; req > 0 {
			cold := (b.ColdWaited - a.ColdWaited) + (b.ColdRefused - a.ColdRefused)
			out[i].HitRatio = Num(math.Max(0, 1-cold/req))
		}
	}
	return out
}
