package worker

import (
	"context"
	"fmt"
	"io"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/hosting"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// MaxReplicasPerVersion bounds SetReplicas on one worker.
const MaxReplicasPerVersion = 64

// SetReplicas implements the worker control service: it grows a ready
// version's replica pool (each new replica loaded from the cached
// artifact and checked against the golden examples before it joins, so it
// takes work only when ready) or shrinks it (serving.RemoveReplica: the
// replica finishes its batch first). A worker keeps at least one replica
// of a version it holds; unloading is Unload.
func (w *Worker) SetReplicas(ctx context.Context, req *workerpb.SetReplicasRequest) (*workerpb.SetReplicasResponse, error) {
	if req.Replicas < 1 || req.Replicas > MaxReplicasPerVersion {
		return nil, hop.Status(errs.Field(errs.InvalidArgument, "replicas", "must be 1 to %d on one worker, got %d", MaxReplicasPerVersion, req.Replicas))
	}
	v, err := w.ready(req.Model, fmt.Sprint(req.Version))
	if err != nil {
		return nil, hop.Status(err)
	}
	v.scale.Lock()
	defer v.scale.Unlock()
	want := int(req.Replicas)
	for {
		have := v.srv.Replicas().Ready
		if have == want {
			break
		}
		if have > want {
			if err := v.srv.RemoveReplica(ctx); err != nil {
				return nil, hop.Status(errs.Wrap(errs.Unavailable, err, "%s: remove a replica: %v", v.id(), err))
			}
			continue
		}
		// Load the missing replicas in parallel, each holding a load slot
		// (bounded like loads, off the serving goroutines): growing by k
		// costs about one load time, not k.
		missing := want - have
		errc := make(chan error, missing)
		for range missing {
			go func() {
				select {
				case w.loads <- struct{}{}:
				case <-ctx.Done():
					errc <- errs.New(errs.DeadlineExceeded, "%s: no load slot before the deadline", v.id())
					return
				}
				m, err := w.loadReplica(ctx, v)
				<-w.loads
				if err == nil {
					err = v.srv.AddReplica(m)
				}
				errc <- err
			}()
		}
		var first error
		for range missing {
			if err := <-errc; err != nil && first == nil {
				first = err
			}
		}
		if first != nil {
			return nil, hop.Status(errs.Wrap(errs.Unavailable, first, "%s: add a replica: %v", v.id(), first))
		}
	}
	n := v.srv.Replicas().Ready
	w.log.Info("replicas set", "model", v.model, "version", v.n, "replicas", n)
	return &workerpb.SetReplicasResponse{ReadyReplicas: int32(n)}, nil
}

// loadReplica loads and checks one more model of v from its cached artifact.
func (w *Worker) loadReplica(ctx context.Context, v *version) (runtime.Model, error) {
	req := v.req
	art, _, err := w.cache.Get(ctx, req.ArtifactSha256, max(req.ArtifactBytes, 0)+1, func(ctx context.Context) (io.ReadCloser, int64, error) {
		return w.fetch(ctx, req.ArtifactSha256)
	})
	if err != nil {
		return nil, err
	}
	m, err := hosting.LoadModel(ctx, v.id(), v.spec.Manifest.Runtime, v.spec, art)
	if err != nil {
		return nil, err
	}
	if err := hosting.CheckGolden(ctx, v.id(), v.spec, m); err != nil {
		_ = m.Close()
		return nil, err
	}
	return m, nil
}
