// Package api holds the wire types of Sluice's public HTTP API (JSON
// bodies). It has no logic; docs/api.md describes every type here.
package api

import (
	"encoding/json"
	"time"
)

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
	Predictions []map[string]float64 `json:"predictions"`
	// Labels (a version whose postprocess: labels outputs: threshold,
	// topk, map): per instance, each labelled output's label (null:
	// none); Predictions holds the label's index.
	Labels []map[string]*string `json:"labels,omitempty"`
	// FeatureSources (a version with features:): per instance, where
	// each filled field came from (request, memory, redis, database,
	// default, stale).
	FeatureSources []map[string]string `json:"featureSources,omitempty"`
	ModelVersion   string              `json:"modelVersion"`
	SchemaVersion  string              `json:"schemaVersion"`
	RequestID      string              `json:"requestId"`
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
	// MaxLength bounds a sequence field (token ids).
	MaxLength int `json:"maxLength,omitempty"`
	// DType is a sequence field's element type in the model's input
	// tensor ("int64" or "int32"); Mask marks an attention mask (0 or 1,
	// padded with 0).
	DType string `json:"dtype,omitempty"`
	Mask  bool   `json:"mask,omitempty"`
}

// Input is a version's input contract.
type Input struct {
	Schema   string   `json:"schema"`
	Fields   []Field  `json:"fields"`
	Features []string `json:"features"` // feature columns after preprocessing
	// Enrichment is model.yaml features: (nil: none): the entity field
	// and the fields filled from the feature stores.
	Enrichment *Enrichment `json:"enrichment,omitempty"`
}

// Enrichment is a version's feature enrichment (model.yaml features:).
type Enrichment struct {
	Entity     string             `json:"entity"`
	EntityType string             `json:"entityType"`
	View       string             `json:"view"`
	Fields     []string           `json:"fields"`
	Defaults   map[string]float64 `json:"defaults"`
	MaxAge     string             `json:"maxAge,omitempty"`
	Timeout    string             `json:"timeout"`
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
	// InvalidPackage is set when the model's package in the models folder
	// (sluice serve --models) could not be read: it was not published.
	InvalidPackage *InvalidPackage `json:"invalidPackage,omitempty"`
}

// InvalidPackage is a package folder that failed to parse or validate.
type InvalidPackage struct {
	Dir   string `json:"dir"`
	State string `json:"state"` // always "failed"
	Error string `json:"error"` // file:line: key: message, one line per problem
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

// Target is one version in a deployment.
type Target struct {
	Version int    `json:"version"`
	ID      string `json:"id,omitempty"`
	Weight  int    `json:"weight"`
	Shadow  bool   `json:"shadow,omitempty"`
	State   string `json:"state,omitempty"`
}

// Deployment is GET /v1/deployments/{model}: the policy in force.
type Deployment struct {
	Model         string         `json:"model"`
	PolicyVersion int            `json:"policyVersion"`
	Targets       []Target       `json:"targets"`
	UpdatedAt     time.Time      `json:"updatedAt"`
	Actor         string         `json:"actor"`
	Reason        string         `json:"reason"`
	Diff          string         `json:"diff"`
	Rollout       *Rollout       `json:"rollout,omitempty"`
	Shadows       []ShadowReport `json:"shadows,omitempty"`
}

// DeploymentList is GET /v1/deployments: the deployment of every model
// the caller may read that has one, by model name.
type DeploymentList struct {
	Deployments []Deployment `json:"deployments"`
}

// SetTraffic is the body of PUT /v1/deployments/{model}.
type SetTraffic struct {
	Targets []Target `json:"targets"`
	Reason  string   `json:"reason"`
	// ExpectPolicyVersion, when set, makes the change fail with 409 if the
	// deployment changed since it was read.
	ExpectPolicyVersion *int `json:"expectPolicyVersion,omitempty"`
	// Experiment, instead of Targets, starts an A/B experiment: the
	// traffic split A (100 − split) / B (split) by sticky routing key.
	Experiment *ExperimentSpec `json:"experiment,omitempty"`
}

// Policy is one policy version in the history.
type Policy struct {
	PolicyVersion int       `json:"policyVersion"`
	Targets       []Target  `json:"targets"`
	CreatedAt     time.Time `json:"createdAt"`
	Actor         string    `json:"actor"`
	Reason        string    `json:"reason"`
	Diff          string    `json:"diff"`
}

// Event is one audit event.
type Event struct {
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	What   string    `json:"what"`
	Reason string    `json:"reason,omitempty"`
}

// History is GET /v1/deployments/{model}/history.
type History struct {
	Model    string   `json:"model"`
	Policies []Policy `json:"policies"`
	Events   []Event  `json:"events"`
	// NextCursor, when set, fetches the next page (?cursor=): more
	// policies or events follow.
	NextCursor string `json:"nextCursor,omitempty"`
}

// StartRollout is the body of POST /v1/deployments/{model}/rollout.
type StartRollout struct {
	Version int             `json:"version"`
	Plan    json.RawMessage `json:"plan,omitempty"` // a release plan (docs/releases.md); default: the package's, else immediate
	Reason  string          `json:"reason"`
}

// Gate is one rollout gate's last evaluation.
type Gate struct {
	Name     string  `json:"name"`
	Observed float64 `json:"observed"`
	Limit    float64 `json:"limit"`
	Samples  int64   `json:"samples"`
	Ready    bool    `json:"ready"`
	Pass     bool    `json:"pass"`
}

// Rollout is a rollout's status.
type Rollout struct {
	Model        string          `json:"model"`
	Candidate    int             `json:"candidate"`
	Baseline     int             `json:"baseline"`
	Phase        string          `json:"phase"`
	Step         int             `json:"step"`
	Percent      int             `json:"percent"`
	Steps        []int           `json:"steps"`
	StepStart    time.Time       `json:"stepStart"`
	NextStepInMs float64         `json:"nextStepInMs"` // remaining bake time at this step (gates must also pass)
	Reason       string          `json:"reason,omitempty"`
	Started      time.Time       `json:"started"`
	Actor        string          `json:"actor"`
	Gates        []Gate          `json:"gates,omitempty"`
	Plan         json.RawMessage `json:"plan"`
}

// RolloutAction is the body of POST …/rollout:{pause,resume,abort,promote}
// and …:rollback.
type RolloutAction struct {
	Reason string `json:"reason"`
	To     int    `json:"to,omitempty"` // rollback only: the version to send 100 % to
}

// ShadowReport compares a shadow version with the primaries it shadowed.
type ShadowReport struct {
	Version          int     `json:"version"`
	Requests         int64   `json:"requests"`
	Rows             int64   `json:"rows"`
	Disagreements    int64   `json:"disagreements"`
	DisagreementRate float64 `json:"disagreementRate"`
	MeanAbsDiff      float64 `json:"meanAbsDiff"`
	MaxAbsDiff       float64 `json:"maxAbsDiff"`
	P50Ms            float64 `json:"p50Ms"`
	P99Ms            float64 `json:"p99Ms"`
	Errors           int64   `json:"errors"`
	Dropped          int64   `json:"dropped"`
	Incompatible     int64   `json:"incompatible"`
}

// Record is one prediction record (GET /v1/records).
type Record struct {
	RequestID    string          `json:"requestId"`
	Tenant       string          `json:"tenant"`
	Model        string          `json:"model"`
	Version      int             `json:"version"`
	ModelVersion string          `json:"modelVersion,omitempty"`
	LatencyMs    float64         `json:"latencyMs"`
	Outcome      string          `json:"outcome"`
	InputHash    string          `json:"inputHash,omitempty"`
	CreatedAt    time.Time       `json:"createdAt"`
	Attempts     int             `json:"attempts"`
	Input        json.RawMessage `json:"input,omitempty"`
	// Cached is how many of the request's instances were answered from
	// the version's prediction cache (absent: none).
	Cached int `json:"cached,omitempty"`
	// Features is the request's enrichment (model.yaml features:): per
	// instance its entity, the filled values and where each came from.
	Features json.RawMessage `json:"features,omitempty"`
	// Outputs is the answer the caller got: per instance its outputs by
	// name (absent: a failed call, logging: outputs: false, or an answer
	// over 64 KiB).
	Outputs json.RawMessage `json:"outputs,omitempty"`
}

// Records is GET /v1/records.
type Records struct {
	Records []Record `json:"records"`
	// NextCursor, when set, fetches the next (older) page (?cursor=).
	NextCursor string `json:"nextCursor,omitempty"`
	// LimitedBy is "bytes" when the page stopped before ?limit= records
	// because it reached about 8 MiB; NextCursor goes on from there.
	LimitedBy string `json:"limitedBy,omitempty"`
}

// Change is the optional body of archive, load and delete calls: why, for
// the audit trail.
type Change struct {
	Reason string `json:"reason"`
}

// DeletedModel is the body of DELETE /v1/models/{name}.
type DeletedModel struct {
	Model    string `json:"model"`
	Versions []int  `json:"versions"` // now archived and hidden from listings
}
