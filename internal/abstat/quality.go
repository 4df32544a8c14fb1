package abstat

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Pair is one prediction and the label its outcome gave.
type Pair struct {
	Pred  float64 // the model's answer: a probability of class 1 for LogLoss and AUC
	Label float64 // the outcome: 0 or 1 for LogLoss and AUC
}

// Estimate is a model-quality figure with its 95 % interval.
type Estimate struct {
	N     int // pairs it is over
	Value float64
	Low   float64
	High  float64
}

// logLossEps clips probabilities into [ε, 1−ε] before the log (as
// scikit-learn's log_loss does with its eps of 1e-15).
const logLossEps = 1e-15

// LogLoss is the mean of −(y log p + (1−y) log(1−p)) over the pairs, with
// a normal-approximation interval from the losses' sample variance.
func LogLoss(ps []Pair) (Estimate, error) {
	if err := check("log loss", ps, true, true, 1); err != nil {
		return Estimate{}, err
	}
	ls := make([]float64, len(ps))
	for i, p := range ps {
		q := math.Min(1-logLossEps, math.Max(logLossEps, p.Pred))
		if p.Label == 1 {
			ls[i] = -math.Log(q)
		} else {
			ls[i] = -math.Log(1 - q)
		}
	}
	return meanCI(ls), nil
}

// MAE is the mean absolute error |pred − label|, with a
// normal-approximation interval.
func MAE(ps []Pair) (Estimate, error) {
	if err := check("mae", ps, false, false, 1); err != nil {
		return Estimate{}, err
	}
	es := make([]float64, len(ps))
	for i, p := range ps {
		es[i] = math.Abs(p.Pred - p.Label)
	}
	return meanCI(es), nil
}

// RMSE is the root mean squared error. Its interval is the square root of
// the mean squared error's normal-approximation interval (the lower end
// clipped at 0): the square root is monotone, so the coverage carries over.
func RMSE(ps []Pair) (Estimate, error) {
	if err := check("rmse", ps, false, false, 1); err != nil {
		return Estimate{}, err
	}
	es := make([]float64, len(ps))
	for i, p := range ps {
		d := p.Pred - p.Label
		es[i] = d * d
	}
	e := meanCI(es)
	e.Value, e.Low, e.High = math.Sqrt(e.Value), math.Sqrt(math.Max(0, e.Low)), math.Sqrt(e.High)
	return e, nil
}

// AUC is the area under the ROC curve (the probability that a random
// positive scores above a random negative, ties counting one half), with
// DeLong's variance (DeLong, DeLong, Clarke-Pearson 1988, computed by
// midranks as Sun and Xu 2014) and the interval AUC ± z·SE clipped to
// [0, 1]. It needs at least 2 pairs of each label.
func AUC(ps []Pair) (Estimate, error) {
	if err := check("auc", ps, false, true, 1); err != nil {
		return Estimate{}, err
	}
	sorted := slices.Clone(ps)
	slices.SortFunc(sorted, func(x, y Pair) int { return cmp.Compare(x.Pred, y.Pred) })
	var m, n float64 // positives, negatives
	for _, p := range sorted {
		if p.Label == 1 {
			m++
		} else {
			n++
		}
	}
	if m < 2 || n < 2 {
		return Estimate{}, fmt.Errorf("auc: needs at least 2 pairs of each label, got %.0f with label 1 and %.0f with label 0", m, n)
	}
	// Walk the groups of tied scores in order. A group's members share
	// their midrank among all pairs and among their own label, so every
	// positive of a group has the same placement V10 = (rank among all −
	// rank among positives)/n (the share of negatives below it, ties
	// counting one half), every negative V01 = 1 − (rank among all − rank
	// among negatives)/m; sums and sums of squares of the placements give
	// their means and variances.
	var s10, q10, s01, q01 float64
	var seenPos, seenNeg float64
	for i := 0; i < len(sorted); {
		j := i
		var k1, k0 float64
		for ; j < len(sorted) && sorted[j].Pred == sorted[i].Pred; j++ {
			if sorted[j].Label == 1 {
				k1++
			} else {
				k0++
			}
		}
		rAll := float64(i+j+1) / 2
		if k1 > 0 {
			v := (rAll - (seenPos + (k1+1)/2)) / n
			s10 += k1 * v
			q10 += k1 * v * v
		}
		if k0 > 0 {
			v := 1 - (rAll-(seenNeg+(k0+1)/2))/m
			s01 += k0 * v
			q01 += k0 * v * v
		}
		seenPos += k1
		seenNeg += k0
		i = j
	}
	auc := s10 / m
	var10 := math.Max(0, (q10-s10*s10/m)/(m-1))
	var01 := math.Max(0, (q01-s01*s01/n)/(n-1))
	h := z95 * math.Sqrt(var10/m+var01/n)
	return Estimate{N: len(ps), Value: auc, Low: math.Max(0, auc-h), High: math.Min(1, auc+h)}, nil
}

// meanCI is the mean of xs with its 95 % normal-approximation interval
// (the sample variance; no interval for a single value).
func meanCI(xs []float64) Estimate {
	m, v := meanVar(xs)
	h := z95 * math.Sqrt(v/float64(len(xs)))
	return Estimate{N: len(xs), Value: m, Low: m - h, High: m + h}
}

// meanVar is the mean and sample variance (n − 1; 0 for one value).
func meanVar(xs []float64) (mean, variance float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		d := x - mean
		variance += d * d
	}
	return mean, variance / float64(len(xs)-1)
}

// check refuses an empty slice, non-finite numbers, predictions outside
// [0, 1] (probabilities) and labels other than 0 and 1 (binary), naming
// the first bad pair.
func check(what string, ps []Pair, probs, binary bool, min int) error {
	if len(ps) < min {
		return fmt.Errorf("%s: no (prediction, label) pairs", what)
	}
	for i, p := range ps {
		switch {
		case math.IsNaN(p.Pred) || math.IsInf(p.Pred, 0):
			return fmt.Errorf("%s: pair %d: prediction %v is not a finite number", what, i, p.Pred)
		case math.IsNaN(p.Label) || math.IsInf(p.Label, 0):
			return fmt.Errorf("%s: pair %d: label %v is not a finite number", what, i, p.Label)
		case probs && (p.Pred < 0 || p.Pred > 1):
			return fmt.Errorf("%s: pair %d: prediction %v is not a probability in [0, 1]", what, i, p.Pred)
		case binary && p.Label != 0 && p.Label != 1:
			return fmt.Errorf("%s: pair %d: label %v is not 0 or 1", what, i, p.Label)
		}
	}
	return nil
}
