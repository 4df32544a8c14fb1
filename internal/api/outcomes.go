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
