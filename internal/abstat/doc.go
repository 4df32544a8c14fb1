// Package abstat computes the statistics of an A/B experiment from per-arm
// counts and sums: each arm's mean and 95 % interval, the lift with its
// interval, an always-valid sequential p-value (mSPRT), the sample-ratio
// mismatch check, the decision, a rollout gate's action, and model quality
// (log loss, AUC, MAE, RMSE) from (prediction, label) pairs.
//
// Every function is pure: no clock, no state beyond what the caller passes
// (the previous p-value, for the running minimum). The methods, formulas
// and references are in docs/releases.md ("Statistics"); the reference
// numbers of the tests come from scipy (scripts/make_abstat_fixture.py
// writes testdata/reference.json).
//
// Distributions (normal quantiles, the chi-square tail) come from
// gonum.org/v1/gonum/stat/distuv rather than hand-written CDFs: gonum is
// the numerical library of the Go field, and its special functions are
// tested against the Cephes references.
package abstat
