// Package drift measures how far live model inputs and predictions have
// moved from a model version's reference sample: reference histograms per
// feature and per output, sliding-window histograms fed on the hot path
// with sharded counters, and the population stability index (PSI) between
// them. It owns the arithmetic only: it serves no HTTP, touches no store
// and exports no metrics; callers persist a Reference and render a Report.
package drift

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Histogram limits and defaults.
const (
	DefaultBins = 10   // bins BuildReference aims for when asked for <= 0
	MaxBins     = 1000 // bins a Hist may have (bounds a Monitor's memory)
)

// Hist is a reference histogram of one feature or output. With k bins,
// Edges holds the k-1 strictly increasing finite upper bounds: the bins are
// (-inf, Edges[0]], (Edges[0], Edges[1]], …, (Edges[k-2], +inf). Counts
// (len k) and Missing (NaN values) are weights in one unit, counts or
// shares: only their proportions matter.
type Hist struct {
	Name    string    `json:"name"`
	Edges   []float64 `json:"edges"`
	Counts  []float64 `json:"counts"`
	Missing float64   `json:"missing"`
}

// Bins is the number of bins, len(Counts).
func (h *Hist) Bins() int { return len(h.Counts) }

// Total is the weight of all values, missing ones included.
func (h *Hist) Total() float64 {
	t := h.Missing
	for _, c := range h.Counts {
		t += c
	}
	return t
}

// bin is the index of the bin holding v (v not NaN): the first edge >= v.
// (slices.BinarySearch orders NaNs, which costs on the hot path.)
func (h *Hist) bin(v float64) int {
	lo, hi := 0, len(h.Edges)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if h.Edges[mid] < v {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Check reports the first thing wrong with h.
func (h *Hist) Check() error {
	if h.Name == "" {
		return errors.New("histogram has no name")
	}
	if len(h.Counts) == 0 || len(h.Counts) > MaxBins {
		return fmt.Errorf("histogram %q: has %d bins, want 1 to %d", h.Name, len(h.Counts), MaxBins)
	}
	if len(h.Edges) != len(h.Counts)-1 {
		return fmt.Errorf("histogram %q: %d bins need %d edges, got %d", h.Name, len(h.Counts), len(h.Counts)-1, len(h.Edges))
	}
	for i, e := range h.Edges {
		if math.IsNaN(e) || math.IsInf(e, 0) {
			return fmt.Errorf("histogram %q: edge %d is %v, edges must be finite", h.Name, i, e)
		}
		if i > 0 && !(e > h.Edges[i-1]) {
			return fmt.Errorf("histogram %q: edge %d (%v) is not above edge %d (%v)", h.Name, i, e, i-1, h.Edges[i-1])
		}
	}
	for i, c := range h.Counts {
		if !(c >= 0) || math.IsInf(c, 0) {
			return fmt.Errorf("histogram %q: count %d is %v, counts must be finite and >= 0", h.Name, i, c)
		}
	}
	if !(h.Missing >= 0) || math.IsInf(h.Missing, 0) {
		return fmt.Errorf("histogram %q: missing is %v, must be finite and >= 0", h.Name, h.Missing)
	}
	if !(h.Total() > 0) || math.IsInf(h.Total(), 0) {
		return fmt.Errorf("histogram %q: total weight must be finite and > 0", h.Name)
	}
	return nil
}

// Reference holds a model version's reference histograms: one per feature
// column (schema.Schema.Features order) and one per output
// (modelpkg.Spec.OutputNames order). It is stored as JSON.
type Reference struct {
	Features []Hist `json:"features"`
	Outputs  []Hist `json:"outputs"`
}

// Check verifies every histogram and that the names are, in order, the
// given feature and output names.
func (r *Reference) Check(features, outputs []string) error {
	for _, g := range []struct {
		kind  string
		hists []Hist
		names []string
	}{{"feature", r.Features, features}, {"output", r.Outputs, outputs}} {
		if len(g.hists) != len(g.names) {
			return fmt.Errorf("reference has %d %s histograms, the model has %d %ss", len(g.hists), g.kind, len(g.names), g.kind)
		}
		for i := range g.hists {
			if err := g.hists[i].Check(); err != nil {
				return fmt.Errorf("%s %d: %w", g.kind, i, err)
			}
			if g.hists[i].Name != g.names[i] {
				return fmt.Errorf("%s %d: histogram %q, want %q", g.kind, i, g.hists[i].Name, g.names[i])
			}
		}
	}
	return nil
}

// BuildReference computes reference histograms from a sample: rows are
// feature rows (NaN = missing), outputs the model's outputs for them
// (either may be nil for none). Edges are the sample's quantiles at i/bins,
// deduplicated and kept below the column's maximum, so a 0/1 column gets
// two bins; a constant column c gets three, (-inf, c), [c, c] and (c, +inf);
// an all-missing column one empty bin. bins <= 0 means DefaultBins.
func BuildReference(featureNames, outputNames []string, rows, outputs [][]float32, bins int) Reference {
	if bins <= 0 {
		bins = DefaultBins
	}
	bins = min(bins, MaxBins)
	return Reference{
		Features: buildHists(featureNames, rows, bins),
		Outputs:  buildHists(outputNames, outputs, bins),
	}
}

func buildHists(names []string, rows [][]float32, bins int) []Hist {
	hs := make([]Hist, len(names))
	col := make([]float64, 0, len(rows))
	for j, name := range names {
		col = col[:0]
		missing := 0
		for _, r := range rows {
			if j >= len(r) || math.IsNaN(float64(r[j])) {
				missing++
				continue
			}
			col = append(col, float64(r[j]))
		}
		slices.Sort(col)
		h := Hist{Name: name, Edges: quantileEdges(col, bins), Missing: float64(missing)}
		h.Counts = make([]float64, len(h.Edges)+1)
		for _, v := range col {
			h.Counts[h.bin(v)]++
		}
		hs[j] = h
	}
	return hs
}

// quantileEdges picks bin edges for the sorted, NaN-free values.
func quantileEdges(sorted []float64, bins int) []float64 {
	edges := []float64{}
	n := len(sorted)
	if n == 0 {
		return edges
	}
	lo, hi := sorted[0], sorted[n-1]
	finite := func(v float64) bool { return !math.IsInf(v, 0) }
	if lo == hi {
		if finite(lo) {
			edges = append(edges, math.Nextafter(lo, math.Inf(-1)), lo)
		}
		return edges
	}
	for i := 1; i < bins; i++ {
		idx := (i*n+bins-1)/bins - 1 // ceil(i/bins·n) − 1: the lower i/bins-quantile
		v := sorted[max(idx, 0)]
		if finite(v) && v < hi && (len(edges) == 0 || v > edges[len(edges)-1]) {
			edges = append(edges, v)
		}
	}
	if len(edges) == 0 {
		// One value holds more than (bins−1)/bins of the mass at the top:
		// split off what lies below it.
		i, _ := slices.BinarySearch(sorted, hi)
		if v := sorted[i-1]; finite(v) {
			edges = append(edges, v)
		}
	}
	return edges
}
