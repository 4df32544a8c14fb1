package api

import "time"

// OutcomeBatch is the body of POST /v1/outcomes.
type OutcomeBatch struct {
	Outcomes []Outcome `json:"outcomes"`
}

// Outcome is one outcome of a prediction: what happened after it was
// answered (1 or 0 for a conversion, an amount, a label).
type Outcome struct {
	RequestID string     `json:"requestId"`          // the prediction's request id (X-Request-Id of its answer)
	Instance  int        `json:"instance,omitempty"` // the instance of the request (default 0)
	Name      string     `json:"name"`               // the outcome's name, e.g. "converted"
	Value     *float64   `json:"value"`              // required
	At        *time.Time `json:"at,omitempty"`       // when it happened (default: when posted)
}

// OutcomeResult is the answer of POST /v1/outcomes.
type OutcomeResult struct {
	Accepted   int      `json:"accepted"`             // stored now
	Duplicates int      `json:"duplicates"`           // stored before (same requestId, instance, name): not changed
	Unknown    int      `json:"unknown"`              // no prediction of a model the caller may use has this request id (unknown, expired, or not yet written: retry after a second)
	UnknownIDs []string `json:"unknownIds,omitempty"` // the first few of them
}

// ExperimentSpec starts an experiment (PUT /v1/deployments/{model} with
// "experiment").
type ExperimentSpec struct {
	A         int     `json:"a"`                   // the control version
	B         int     `json:"b"`                   // the treatment version
	Split     int     `json:"split"`               // percent of units on B, 1 to 99
	Metric    string  `json:"metric"`              // the outcome name compared
	Direction string  `json:"direction,omitempty"` // "increase" (default) or "decrease": which way is better
	MinEffect float64 `json:"minEffect,omitempty"` // the relative lift that matters (0.01 = 1 %); 0: none
	Alpha     float64 `json:"alpha,omitempty"`     // the sequential test's level (default 0.05)
	Label     string  `json:"label,omitempty"`     // an outcome name holding labels: model quality per arm
}

// ExperimentArm is one arm's figures.
type ExperimentArm struct {
	Version  int     `json:"version"`
	ID       string  `json:"id"`       // "fraud@3"
	Units    int64   `json:"units"`    // distinct routing keys answered since the start
	Outcomes int64   `json:"outcomes"` // outcomes of the metric joined to the arm
	Mean     float64 `json:"mean"`
	Low      float64 `json:"low"`  // 95 % interval of the mean
	High     float64 `json:"high"` //
	// Quality is model quality from the label outcome (absent without
	// one): logLoss and auc for 0/1 labels, mae and rmse otherwise.
	Quality map[string]QualityFigure `json:"quality,omitempty"`
}

// QualityFigure is a model-quality figure with its 95 % interval.
type QualityFigure struct {
	N     int     `json:"n"`
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// Experiment is GET /v1/deployments/{model}/experiment: the experiment's
// figures at its last refresh.
type Experiment struct {
	ID        int64          `json:"id"`
	Model     string         `json:"model"`
	State     string         `json:"state"` // running | stopped
	Spec      ExperimentSpec `json:"spec"`
	Started   time.Time      `json:"started"`
	Stopped   *time.Time     `json:"stopped,omitempty"`
	Actor     string         `json:"actor"`
	Refreshed time.Time      `json:"refreshed"` // when these figures were computed
	A         ExperimentArm  `json:"armA"`
	B         ExperimentArm  `json:"armB"`
	// Lift is B − A with its 95 % interval; RelLift (B − A)/A. SeqLow
	// and SeqHigh are the always-valid intervals the decision reads.
	Lift        float64  `json:"lift"`
	LiftLow     float64  `json:"liftLow"`
	LiftHigh    float64  `json:"liftHigh"`
	RelLift     float64  `json:"relLift"`
	RelLow      float64  `json:"relLow"`
	RelHigh     float64  `json:"relHigh"`
	SeqRelLow   float64  `json:"seqRelLow"`
	SeqRelHigh  float64  `json:"seqRelHigh"`
	PValue      float64  `json:"pValue"` // always-valid (mSPRT): valid however often it is looked at
	Significant bool     `json:"significant"`
	SRMPValue   float64  `json:"srmPValue"`
	SRM         bool     `json:"srm"`      // the split is broken (p < 0.001): no result can be trusted
	Decision    string   `json:"decision"` // running | b_better | a_better | no_difference
	Notes       []string `json:"notes,omitempty"`
	// History is the figures of earlier refreshes, newest first
	// (?history=N, default 20).
	History []ExperimentPoint `json:"history,omitempty"`
}

// ExperimentList is GET /v1/experiments: every running experiment the
// caller may read, at its last refresh, by model name.
type ExperimentList struct {
	Experiments []Experiment `json:"experiments"`
}

// ExperimentPoint is one refresh of the history.
type ExperimentPoint struct {
	At       time.Time `json:"at"`
	UnitsA   int64     `json:"unitsA"`
	UnitsB   int64     `json:"unitsB"`
	MeanA    float64   `json:"meanA"`
	MeanB    float64   `json:"meanB"`
	RelLift  float64   `json:"relLift"`
	PValue   float64   `json:"pValue"`
	SRM      bool      `json:"srm"`
	Decision string    `json:"decision"`
}
