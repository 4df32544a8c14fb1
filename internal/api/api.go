// Package api holds the wire types of Sluice's public HTTP API (JSON
// bodies). It has no logic; docs/api.md describes every type here.
package api

import "time"

// ErrorBody is every error response: {"error":{...}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail describes one error.
type ErrorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Field     string `json:"field,omitempty"`
	RequestID string `json:"requestId,omitempty"`
}

// PredictResponse is the body of a successful predict call. The server
// writes it by hand (float32 outputs in shortest form, fields in output
// order); this type documents it and lets clients decode it.
type PredictResponse struct {
	Predictions   []map[string]float64 `json:"predictions"`
	ModelVersion  string               `json:"modelVersion"`
	SchemaVersion string               `json:"schemaVersion"`
	RequestID     string               `json:"requestId"`
}

// Field describes one input field.
type Field struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Min      *float64 `json:"min,omitempty"`
	Max      *float64 `json:"max,omitempty"`
	Optional bool     `json:"optional,omitempty"`
	Default  any      `json:"default,omitempty"`
	Values   []string `json:"values,omitempty"`
}

// Input is a version's input contract.
type Input struct {
	Schema   string   `json:"schema"`
	Fields   []Field  `json:"fields"`
	Features []string `json:"features"` // feature columns after preprocessing
}

// Output is a version's output contract.
type Output struct {
	Schema string   `json:"schema"`
	Fields []string `json:"fields"`
}

// Timings of a version's last load, in milliseconds.
type Timings struct {
	LoadMs   float64 `json:"loadMs"`
	GoldenMs float64 `json:"goldenMs"`
	WarmupMs float64 `json:"warmupMs"`
}

// Serving is a version's serving configuration and live queue state.
type Serving struct {
	MaxInstancesPerRequest int     `json:"maxInstancesPerRequest"`
	DefaultDeadlineMs      float64 `json:"defaultDeadlineMs"`
	Replicas               int     `json:"replicas"`
	MaxBatchSize           int     `json:"maxBatchSize"`
	MaxBatchDelayMs        float64 `json:"maxBatchDelayMs"`
	MaxQueueInstances      int     `json:"maxQueueInstances"`
	ReadyReplicas          int     `json:"readyReplicas"`
	QueuedInstances        int     `json:"queuedInstances"`
	Batches                int64   `json:"batches"`
	ExpiredInQueue         int64   `json:"expiredInQueue"`
	ReplicaCrashes         int64   `json:"replicaCrashes"`
	CostBaseMs             float64 `json:"costBaseMs"`
	CostPerInstanceMs      float64 `json:"costPerInstanceMs"`
}

// Version describes one model version.
type Version struct {
	Model          string    `json:"model"`
	Version        int       `json:"version"`
	ID             string    `json:"id"`
	State          string    `json:"state"`
	Reason         string    `json:"reason,omitempty"`
	Serving        bool      `json:"serving"`
	Runtime        string    `json:"runtime"`
	ArtifactSHA256 string    `json:"artifactSha256"`
	ArtifactBytes  int64     `json:"artifactBytes"`
	Digest         string    `json:"digest"`
	Description    string    `json:"description,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	Timings        Timings   `json:"timings"`
	Input          *Input    `json:"input,omitempty"`
	Output         *Output   `json:"output,omitempty"`
	Config         *Serving  `json:"servingConfig,omitempty"`
}

// VersionSummary is a version in a model listing.
type VersionSummary struct {
	Version int    `json:"version"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}

// Model describes a model and its versions.
type Model struct {
	Name           string           `json:"name"`
	ServingVersion *int             `json:"servingVersion"`
	Versions       []VersionSummary `json:"versions"`
	// Input and Output are the serving version's contract (or the newest
	// version's while none serves).
	Input  *Input  `json:"input,omitempty"`
	Output *Output `json:"output,omitempty"`
}

// ModelList is GET /v1/models.
type ModelList struct {
	Models []Model `json:"models"`
}

// PublishResponse is the body of POST /v1/models/{name}/versions.
type PublishResponse struct {
	Created bool    `json:"created"`
	Version Version `json:"version"`
}

// Readiness is the body of GET /readyz.
type Readiness struct {
	Ready    bool     `json:"ready"`
	Problems []string `json:"problems,omitempty"` // why not ready
	Warnings []string `json:"warnings,omitempty"` // models that cannot serve (they answer 503)
}
