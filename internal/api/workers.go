package api

import "time"

// WorkerList is the body of GET /v1/workers.
type WorkerList struct {
	// Mode is "in-process" (replicas run in the gateway; no workers) or "workers".
	Mode    string   `json:"mode"`
	Workers []Worker `json:"workers"`
}

// Worker is one worker process as the control plane sees it.
type Worker struct {
	ID            string          `json:"id"`
	Address       string          `json:"address"`
	PID           int64           `json:"pid"`
	State         string          `json:"state"` // ready, down
	Reason        string          `json:"reason,omitempty"`
	RSSBytes      int64           `json:"rssBytes"`
	CacheBytes    int64           `json:"cacheBytes"`
	Started       time.Time       `json:"started,omitzero"`
	LastHeartbeat time.Time       `json:"lastHeartbeat,omitzero"`
	Versions      []WorkerVersion `json:"versions"`
}

// WorkerVersion is one version held by a worker.
type WorkerVersion struct {
	Version            string `json:"version"` // "fraud@3"
	State              string `json:"state"`   // loading, ready, failed, unloading
	Reason             string `json:"reason,omitempty"`
	ReadyReplicas      int    `json:"readyReplicas"`
	RestartingReplicas int    `json:"restartingReplicas"`
	QueuedInstances    int64  `json:"queuedInstances"`
	InflightBatches    int    `json:"inflightBatches"`
	Batches            int64  `json:"batches"`
	Rows               int64  `json:"rows"`
	Crashes            int64  `json:"crashes"`
}
