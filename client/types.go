package client

import "github.com/sluiceml/sluice/internal/api"

// The API's wire types (docs/api.md, docs/openapi.yaml), under names a
// program outside this module can write: the calls of Client take and
// answer these. They are aliases of internal/api's, so a value is the
// same either way; TestEveryWireTypeAliased keeps the list whole.
type (
	ErrorBody       = api.ErrorBody
	ErrorDetail     = api.ErrorDetail
	PredictResponse = api.PredictResponse
	Field           = api.Field
	Input           = api.Input
	Enrichment      = api.Enrichment
	Output          = api.Output
	Timings         = api.Timings
	Serving         = api.Serving
	Version         = api.Version
	VersionSummary  = api.VersionSummary
	Model           = api.Model
	InvalidPackage  = api.InvalidPackage
	ModelList       = api.ModelList
	PublishResponse = api.PublishResponse
	Readiness       = api.Readiness
	Target          = api.Target
	Deployment      = api.Deployment
	DeploymentList  = api.DeploymentList
	ExperimentList  = api.ExperimentList
	SetTraffic      = api.SetTraffic
	Policy          = api.Policy
	Event           = api.Event
	History         = api.History
	StartRollout    = api.StartRollout
	Gate            = api.Gate
	Rollout         = api.Rollout
	RolloutAction   = api.RolloutAction
	ShadowReport    = api.ShadowReport
	Record          = api.Record
	Records         = api.Records
	Change          = api.Change
	DeletedModel    = api.DeletedModel
	EventWeight     = api.EventWeight
	EventDeployment = api.EventDeployment
	EventRollout    = api.EventRollout
	EventVersion    = api.EventVersion
	EventWorker     = api.EventWorker
	EventAudit      = api.EventAudit
	EventReset      = api.EventReset
	ModelStats      = api.ModelStats
	VersionStats    = api.VersionStats
	StatPoint       = api.StatPoint
	JobIO           = api.JobIO
	JobSubmit       = api.JobSubmit
	JobState        = api.JobState
	JobSpec         = api.JobSpec
	JobRowError     = api.JobRowError
	JobCounts       = api.JobCounts
	Job             = api.Job
	JobStatus       = api.JobStatus
	JobList         = api.JobList
	OutcomeBatch    = api.OutcomeBatch
	Outcome         = api.Outcome
	OutcomeResult   = api.OutcomeResult
	ExperimentSpec  = api.ExperimentSpec
	ExperimentArm   = api.ExperimentArm
	QualityFigure   = api.QualityFigure
	Experiment      = api.Experiment
	ExperimentPoint = api.ExperimentPoint
	WorkerList      = api.WorkerList
	WorkerDemand    = api.WorkerDemand
	Worker          = api.Worker
	WorkerVersion   = api.WorkerVersion
)
