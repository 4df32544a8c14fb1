package control

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/serving"
)

// Host runs the replicas of versions: in this process (LocalHost) or on
// worker processes (cluster.Pool). Start returns once the version is ready
// to serve (its golden examples passed and it is warm wherever it runs) or
// has failed, with the reason.
type Host interface {
	Start(ctx context.Context, req HostRequest) (Hosted, hosting.Timings, error)
	Name() string // "in-process", "workers", for logs
}

// HostRequest is one version to host.
type HostRequest struct {
	Version  registry.Version
	Spec     *modelpkg.Spec
	Observer serving.Observer // batch and replica events (may be nil)
	Logger   *slog.Logger
}

// Hosted is a running version as the controller sees it: the data plane
// submits to it, the API reads its figures, shutdown closes it.
type Hosted interface {
	routing.Backend
	Stats() serving.Stats
	Close(ctx context.Context) error
}

// LocalHost runs replicas in this process: no hop, one heap.
type LocalHost struct {
	// Artifact returns the verified bytes of an artifact.
	Artifact func(ctx context.Context, sha string) ([]byte, error)
	// CPUs bounds the batches computing at once in this process (sluice
	// serve --model-cpus; nil: no bound).
	CPUs *serving.CPUs
}

// Name implements Host.
func (*LocalHost) Name() string { return "in-process" }

// Start implements Host.
func (h *LocalHost) Start(ctx context.Context, req HostRequest) (Hosted, hosting.Timings, error) {
	v := req.Version
	art, err := h.Artifact(ctx, v.ArtifactSHA)
	if err != nil {
		return nil, hosting.Timings{}, fmt.Errorf("load %s: %w", v.ID(), err)
	}
	srv, tm, err := hosting.Start(ctx, hosting.Config{ID: v.ID(), Spec: req.Spec, Runtime: v.Runtime, Artifact: art,
		Logger: req.Logger, Observer: req.Observer, CPUs: h.CPUs})
	if err != nil {
		return nil, tm, err
	}
	return srv, tm, nil
}
