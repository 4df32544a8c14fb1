package api

import "time"

// WorkerList is the body of GET /v1/workers.
type WorkerList struct {
	// Mode is "in-process" (replicas run in the gateway; no workers) or "workers".
	Mode    string   `json:"mode"`
	Workers []Worker `json:"workers"`
	// Demand is what each version asks of the workers (mode "workers"):
	// a Kubernetes pool is sized from it (sluice controller).
	Demand []WorkerDemand `json:"demand,omitempty"`
}

// WorkerDemand is one version's demand on the workers.
type WorkerDemand struct {
	Version string `json:"version"`
	// Replicas is what the autoscaler wants (or the fixed count), before
	// the workers' memory caps it.
	Replicas int `json:"replicas"`
	// Copies is how many workers hold it (its shard; 0: cold, not loaded).
	Copies             int   `json:"copies"`
	ReplicaMemoryBytes int64 `json:"replicaMemoryBytes"`
}

// Worker is one worker process as the control plane sees it.
type Worker struct {
	ID         string `json:"id"`
	Address    string `json:"address"`
	PID        int64  `json:"pid"`
	State      string `json:"state"` // ready, down
	Reason     string `json:"reason,omitempty"`
	RSSBytes   int64  `json:"rssBytes"`
	CacheBytes int64  `json:"cacheBytes"`
	// MemoryBudgetBytes is what its versions may hold (sluice worker
	// --worker-memory, or the default from the cgroup or host memory;
	// MemoryBudgetSource says which); MemoryUsedBytes what they hold as
	// placement counts it (measured memory of loaded versions, the
	// estimate of those loading).
	MemoryBudgetBytes  int64  `json:"memoryBudgetBytes"`
	MemoryBudgetSource string `json:"memoryBudgetSource,omitempty"`
	MemoryUsedBytes    int64  `json:"memoryUsedBytes"`
	// Loads and Evictions count the loads onto and evictions from this
	// worker since the server started.
	Loads         int64           `json:"loads"`
	Evictions     int64           `json:"evictions"`
	Started       time.Time       `json:"started,omitzero"`
	LastHeartbeat time.Time       `json:"lastHeartbeat,omitzero"`
	Versions      []WorkerVersion `json:"versions"`
}

// WorkerVersion is one version held by a worker.
type WorkerVersion struct {
	Version            string `json:"version"`        // "fraud@3"
	Tier               string `json:"tier,omitempty"` // hot, warm, cold
	State              string `json:"state"`          // loading, ready, failed, unloading
	Reason             string `json:"reason,omitempty"`
	ReadyReplicas      int    `json:"readyReplicas"`
	RestartingReplicas int    `json:"restartingReplicas"`
	QueuedInstances    int64  `json:"queuedInstances"`
	InflightBatches    int    `json:"inflightBatches"`
	Batches            int64  `json:"batches"`
	Rows               int64  `json:"rows"`
	Crashes            int64  `json:"crashes"`
	// MemoryBytes is the version's memory on this worker, all replicas
	// (the RSS growth of its load when MemoryMeasured, else the estimate).
	MemoryBytes    int64 `json:"memoryBytes"`
	MemoryMeasured bool  `json:"memoryMeasured"`
	// LastUsed is when this gateway last sent it a call on this worker;
	// LoadTimeMs what its load here took (load + golden + warmup).
	LastUsed   time.Time `json:"lastUsed,omitzero"`
	LoadTimeMs float64   `json:"loadTimeMs"`
	// Loads and Evictions count its loads onto and evictions from this
	// worker since the server started.
	Loads     int64 `json:"loads"`
	Evictions int64 `json:"evictions"`
}
