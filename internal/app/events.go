package app

import (
	"context"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/events"
	"github.com/sluiceml/sluice/internal/server"
)

// workerLook is how often the "events" part compares the workers'
// states (joins, leaves, ready and down come from heartbeats, registers
// and the pod watch in the pool; a look every second keeps a page within
// the 2 s of docs/api.md "Events" without a hook in each).
const workerLook = time.Second

// changeFeed is the "events" part: the hub of GET /v1/events, which the
// controller publishes into (control.Config.Changed) and, in workers
// mode, its Run into, after comparing the pool's workers.
type changeFeed struct {
	hub    *events.Hub
	ctx    context.Context
	cancel context.CancelFunc
}

func (a *app) startEvents(context.Context) error {
	f := &changeFeed{hub: events.New(a.cfg.Events)}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	a.feed = f
	return nil
}

// changed is the controller's Config.Changed.
func (a *app) changed(c control.Change) { server.PublishChange(a.feed.hub, c) }

// runEvents compares the pool's workers every workerLook and publishes
// what changed (nothing to do without workers: it waits for the stop).
func (a *app) runEvents() error {
	f := a.feed
	if a.pool == nil {
		<-f.ctx.Done()
		return nil
	}
	t := time.NewTicker(workerLook)
	defer t.Stop()
	var prev map[string]events.Worker
	for {
		cur := map[string]events.Worker{}
		for _, w := range a.pool.Workers() {
			cur[w.ID] = events.Worker{State: w.State, Reason: w.Reason}
		}
		for _, e := range events.DiffWorkers(prev, cur) {
			f.hub.Publish(api.EventKindWorker, "", e)
		}
		prev = cur
		select {
		case <-f.ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// stopEvents ends Run and every stream still open (the listeners' drain
// ended those of HTTP already).
func (a *app) stopEvents(context.Context) error {
	a.feed.cancel()
	a.feed.hub.Close()
	return nil
}
