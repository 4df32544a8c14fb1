package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/cluster"
)

// WorkerLister lists worker processes (a cluster.Pool).
type WorkerLister interface {
	Workers() []cluster.WorkerInfo
}

// DemandSource is what the versions ask of the workers (cluster.Pool's
// Demand with the autoscaler's decisions).
type DemandSource func() []cluster.Demand

// listWorkers serves GET /v1/workers: to admin tenants only (issue 18,
// finding 10: it needed no key and showed every model and worker), with
// the versions and demand of the caller's models only.
func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) error {
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	if err := needAdmin(tn, "list the workers"); err != nil {
		return err
	}
	mine := func(version string) bool {
		model, _, _ := strings.Cut(version, "@")
		return tn.Allowed(model)
	}
	out := api.WorkerList{Mode: "in-process", Workers: []api.Worker{}}
	if s.cfg.Workers != nil {
		out.Mode = "workers"
		for _, wi := range s.cfg.Workers.Workers() {
			aw := api.Worker{ID: wi.ID, Address: wi.Address, PID: wi.PID, State: wi.State, Reason: wi.Reason, RSSBytes: wi.RSS,
				CacheBytes: wi.CacheSize, Started: jsonTime(wi.Started), LastHeartbeat: jsonTime(wi.LastBeat), Versions: []api.WorkerVersion{},
				MemoryBudgetBytes: wi.Budget, MemoryBudgetSource: wi.BudgetSource, MemoryUsedBytes: wi.MemoryUsed, Loads: wi.Loads, Evictions: wi.Evictions}
			for _, v := range wi.Versions {
				if !mine(v.ID) {
					continue
				}
				aw.Versions = append(aw.Versions, api.WorkerVersion{Version: v.ID, State: v.State, Reason: v.Reason, ReadyReplicas: v.ReadyReplicas,
					RestartingReplicas: v.RestartingReplicas, QueuedInstances: v.QueuedInstances, InflightBatches: v.InflightBatches,
					Batches: v.Batches, Rows: v.Rows, Crashes: v.Crashes, Tier: v.Tier, MemoryBytes: v.Memory, MemoryMeasured: v.MemoryMeasured,
					LastUsed: jsonTime(v.LastUsed), LoadTimeMs: float64(v.LoadTime.Microseconds()) / 1000, Loads: v.Loads, Evictions: v.Evictions})
			}
			out.Workers = append(out.Workers, aw)
		}
		if s.cfg.Demand != nil {
			for _, d := range s.cfg.Demand() {
				if !mine(d.Version) {
					continue
				}
				out.Demand = append(out.Demand, api.WorkerDemand{Version: d.Version, Replicas: d.Replicas, Copies: d.Copies, ReplicaMemoryBytes: d.ReplicaMemory})
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// jsonTime is t in UTC, or the zero time when JSON cannot carry it (a
// year outside 0..9999): no figure a worker reports makes the list fail.
func jsonTime(t time.Time) time.Time {
	if t = t.UTC(); t.Year() < 0 || t.Year() > 9999 {
		return time.Time{}
	}
	return t
}
