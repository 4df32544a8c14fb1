package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/events"
	"github.com/sluiceml/sluice/internal/tenant"
)

// The event stream's timings (GET /v1/events).
const (
	eventsPing       = 15 * time.Second // a comment line ": ping" this often keeps proxies from closing an idle stream
	eventsWriteLimit = 10 * time.Second // a write the client does not take within this ends its stream
	eventsRetryMs    = 1000             // the "retry:" the stream advises: reconnect after 1 s
	maxEventModels   = 100              // names in ?models=
)

// streamEvents serves GET /v1/events: the hub's events the caller may
// read, as server-sent events (docs/api.md "Events"). It never holds the
// publisher: a stream that falls behind is dropped by the hub, and one
// whose client does not take a write within eventsWriteLimit ends.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	hub := s.cfg.Events
	if hub == nil {
		return errs.New(errs.NotFound, "this server has no event stream")
	}
	want, err := eventModels(tn, r.URL.Query().Get("models"))
	if err != nil {
		return err
	}
	var after uint64
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("lastEventId") // for clients that cannot set headers
	}
	if last != "" {
		if after, err = strconv.ParseUint(last, 10, 64); err != nil {
			return errs.Field(errs.InvalidArgument, "Last-Event-ID", "%q is not an event id (the id: of an event this stream sent)", errs.Clip(last))
		}
	}
	sub, replay, gap, err := hub.Subscribe(after, eventMatch(tn, want))
	switch {
	case errors.Is(err, events.ErrTooMany):
		e := errs.New(errs.TooManyStreams, "%d event streams are open, the server's bound (--events-max-streams): close one, or retry later", hub.Streams())
		e.RetryAfter = 5 * time.Second
		return e
	case errors.Is(err, events.ErrClosed):
		return errs.New(errs.ShuttingDown, "the server is shutting down")
	case err != nil:
		return err
	}
	defer sub.Close()

	boundSendBuffer(r)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // the request is read: its read timeout must not end the stream
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies that buffer (nginx) pass it at once
	var buf []byte
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventsWriteLimit))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	w.WriteHeader(http.StatusOK)
	buf = fmt.Appendf(buf[:0], "retry: %d\n\n", eventsRetryMs)
	if gap {
		buf = appendReset(buf, "the events after Last-Event-ID "+last+" are no longer kept: read the state again")
	}
	for _, e := range replay {
		buf = appendEvent(buf, e)
	}
	if !write(buf) {
		return nil
	}
	ping := time.NewTicker(eventsPing)
	defer ping.Stop()
	for {
		select {
		case e, ok := <-sub.C():
			if !ok {
				if sub.Dropped() {
					write(appendReset(buf[:0], "this stream fell behind and was dropped: reconnect with Last-Event-ID"))
				}
				return nil
			}
			buf = appendEvent(buf[:0], e)
			for more := true; more && len(buf) < 64<<10; { // what else is queued, in one write
				select {
				case e, ok := <-sub.C():
					if !ok {
						more = false
						break
					}
					buf = appendEvent(buf, e)
				default:
					more = false
				}
			}
			if !write(buf) {
				return nil
			}
		case <-ping.C:
			if !write([]byte(": ping\n\n")) {
				return nil
			}
		case <-r.Context().Done():
			return nil
		case <-s.drainc:
			return nil
		}
	}
}

// eventsSendBuffer bounds the kernel's send buffer of an HTTP/1.1
// connection that carries an event stream (Linux doubles it): what a
// reader that does not read holds in the kernel, instead of the several
// MB TCP autotuning allows, so that it falls behind and is dropped.
const eventsSendBuffer = 32 << 10

type connKey struct{}

// withConn keeps the connection in its requests' context (http.Server's
// ConnContext).
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// boundSendBuffer sets the send buffer of r's connection to
// eventsSendBuffer (an HTTP/1.1 one: an HTTP/2 connection carries other
// streams too, and its flow control bounds each stream already).
func boundSendBuffer(r *http.Request) {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	if r.ProtoMajor != 1 || c == nil {
		return
	}
	for { // through the TLS and connection-limit wrappers
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetWriteBuffer(eventsSendBuffer)
	}
}

// appendEvent appends e in the text/event-stream format (its data is one
// line of JSON).
func appendEvent(b []byte, e events.Event) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, e.ID, 10)
	b = append(b, "\nevent: "...)
	b = append(b, e.Kind...)
	b = append(b, "\ndata: "...)
	b = append(b, e.Data...)
	return append(b, "\n\n"...)
}

// appendReset appends a reset event: no id, so the client's Last-Event-ID
// stays what it was.
func appendReset(b []byte, why string) []byte {
	d, _ := json.Marshal(api.EventReset{Reason: why})
	b = append(b, "event: "+api.EventKindReset+"\ndata: "...)
	b = append(b, d...)
	return append(b, "\n\n"...)
}

// eventModels reads ?models=a,b: each a model name the tenant may read
// (nil: no filter).
func eventModels(tn *tenant.Tenant, q string) (map[string]bool, error) {
	if q == "" {
		return nil, nil
	}
	names := strings.Split(q, ",")
	if len(names) > maxEventModels {
		return nil, errs.Field(errs.InvalidArgument, "models", "%d models, at most %d", len(names), maxEventModels)
	}
	want := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if err := checkModelName(n); err != nil {
			return nil, errs.Field(errs.InvalidArgument, "models", "%q: %s (a comma-separated list of model names)", errs.Clip(n), errs.As(err).Message)
		}
		want[n] = true
	}
	for n := range want { // every name well formed first: a typo is a 400, not a 403
		if err := tn.Check(n); err != nil {
			return nil, err
		}
	}
	return want, nil
}

// eventMatch says which events a stream of tn carries: its models' (those
// in want, when set); workers' only to an admin asking for no models.
func eventMatch(tn *tenant.Tenant, want map[string]bool) func(events.Event) bool {
	return func(e events.Event) bool {
		if e.Model == "" {
			return tn.Admin && want == nil
		}
		if want != nil && !want[e.Model] {
			return false
		}
		return tn.Allowed(e.Model)
	}
}

// PublishChange publishes a controller change on hub as its event: the
// one place control.Change becomes the API's event types (app passes it
// as control.Config.Changed).
func PublishChange(hub *events.Hub, c control.Change) {
	switch c.Kind {
	case "deployment":
		d := api.EventDeployment{Model: c.Model, Policy: c.Policy.Version, Weights: []api.EventWeight{}, Actor: c.Policy.Actor,
			Reason: c.Policy.Reason, Diff: c.Policy.Diff, At: c.Policy.CreatedAt, FromElsewhere: c.Adopted}
		for _, t := range c.Policy.Targets {
			d.Weights = append(d.Weights, api.EventWeight{Version: t.Version, Weight: t.Weight, Shadow: t.Shadow, ID: fmt.Sprintf("%s@%d", c.Model, t.Version)})
		}
		hub.Publish(api.EventKindDeployment, c.Model, d)
	case "rollout":
		r := rolloutJSON(c.Rollout)
		hub.Publish(api.EventKindRollout, c.Model, api.EventRollout{Model: c.Model, State: r.Phase, Step: r.Step, Of: len(r.Steps),
			Percent: r.Percent, Candidate: r.Candidate, Baseline: r.Baseline, Reason: r.Reason, Gates: append([]api.Gate{}, r.Gates...)})
	case "version":
		hub.Publish(api.EventKindVersion, c.Model, api.EventVersion{Model: c.Model, Version: c.Version,
			ID: fmt.Sprintf("%s@%d", c.Model, c.Version), State: string(c.State), Reason: c.Reason})
	case "audit":
		e := c.Audit
		hub.Publish(api.EventKindAudit, c.Model, api.EventAudit{Model: c.Model, Event: api.Event{At: e.At, Actor: e.Actor, Action: e.Action, What: e.What, Reason: e.Reason}})
	}
}
