package abstat

import (
	"fmt"
	"math"
	"sort"
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
	var pos, neg []float64
	for _, p := range ps {
		if p.Label == 1 {
			pos = append(pos, p.Pred)
		} else {
			neg = append(neg, p.Pred)
		}
	}
	if len(pos) < 2 || len(neg) < 2 {
		return Estimate{}, fmt.Errorf("auc: needs at least 2 pairs of each label, got %d with label 1 and %d with label 0", len(pos), len(neg))
	}
	all := append(append(make([]float64, 0, len(ps)), pos...), neg...)
	rAll, rPos, rNeg := midranks(all), midranks(pos), midranks(neg)
	m, n := float64(len(pos)), float64(len(neg))
	v10 := make([]float64, len(pos)) // per positive: share of negatives below it
	for i := range pos {
		v10[i] = (rAll[i] - rPos[i]) / n
	}
	v01 := make([]float64, len(neg)) // per negative: share of positives above it
	for j := range neg {
		v01[j] = 1 - (rAll[len(pos)+j]-rNeg[j])/m
	}
	mean10, var10 := meanVar(v10)
	_, var01 := meanVar(v01)
	se := math.Sqrt(var10/m + var01/n)
	h := z95 * se
	return Estimate{N: len(ps), Value: mean10, Low: math.Max(0, mean10-h), High: math.Min(1, mean10+h)}, nil
}

// midranks returns the 1-based ranks of xs, ties getting the mean of
// their ranks.
func midranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })
	r := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && xs[idx[j]] == xs[idx[i]] {
			j++
		}
		mid := float64(i+j+1) / 2 // mean of ranks i+1 .. j
		for k := i; k < j; k++ {
			r[idx[k]] = mid
		}
		i = j
	}
	return r
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
