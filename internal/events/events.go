// Package events is the server's change feed behind GET /v1/events: a
// Hub that numbers each change, keeps the last ones in a bounded ring for
// Last-Event-ID replay, and hands them to a bounded number of
// subscribers, each through a bounded buffer. Publish never blocks: a
// subscriber whose buffer is full is dropped (its stream ends; the client
// reconnects and replays from the ring). It knows nothing of HTTP,
// tenants or the controller: the server filters and writes, app feeds it.
package events

import (
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/sluiceml/sluice/internal/api"
)

// Event is one change: its number, its kind (api.EventKind…), the model
// it concerns ("" for a worker) and its JSON data.
type Event struct {
	ID    uint64
	Kind  string
	Model string
	Data  []byte
}

// Config bounds a Hub; zero fields take the defaults.
type Config struct {
	Ring       int // events kept for replay (default 1024)
	Buffer     int // events a subscriber may fall behind before it is dropped (default 256)
	MaxStreams int // subscribers at once (default 128)
	// Start is the first event's number minus one (default: the Unix
	// time in microseconds at New), so numbers grow across restarts and a
	// Last-Event-ID from an earlier process is older than the ring.
	Start uint64
}

// ErrTooMany is Subscribe's error when MaxStreams subscribers are open.
var ErrTooMany = errors.New("too many event streams")

// ErrClosed is Subscribe's error once the hub is closed.
var ErrClosed = errors.New("event hub closed")

// Hub numbers, keeps and fans out events. Its zero value is not usable:
// New makes one.
type Hub struct {
	cfg Config

	mu     sync.Mutex // guards everything below
	seq    uint64     // the last event's number
	ring   []Event    // circular, len ≤ cfg.Ring
	head   int        // index of the oldest event once the ring is full
	subs   map[*Sub]struct{}
	closed bool
}

// New returns a hub bounded by cfg.
func New(cfg Config) *Hub {
	if cfg.Ring <= 0 {
		cfg.Ring = 1024
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 256
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 128
	}
	if cfg.Start == 0 {
		cfg.Start = uint64(time.Now().UnixMicro())
	}
	return &Hub{cfg: cfg, seq: cfg.Start, subs: map[*Sub]struct{}{}}
}

// Sub is one subscriber. C delivers its events in order; it is closed
// when the subscriber is dropped (Dropped says so), unsubscribed or the
// hub closes.
type Sub struct {
	h       *Hub
	ch      chan Event
	match   func(Event) bool
	dropped bool // guarded by h.mu
	done    bool // guarded by h.mu: ch closed
}

// C is the subscriber's events.
func (s *Sub) C() <-chan Event { return s.ch }

// Dropped reports whether the subscriber fell Buffer events behind and
// was dropped (once C is closed).
func (s *Sub) Dropped() bool {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return s.dropped
}

// Close unsubscribes. It may be called more than once.
func (s *Sub) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.endLocked()
}

func (s *Sub) endLocked() {
	if !s.done {
		s.done = true
		close(s.ch)
		delete(s.h.subs, s)
	}
}

// Publish numbers an event of kind about model with v as its JSON data,
// keeps it in the ring and offers it to every matching subscriber without
// waiting: one whose buffer is full is dropped. It returns the event's
// number (0 once the hub is closed or v does not encode). It may be
// called with the caller's locks held: it takes only the hub's, and the
// subscribers' match functions must be quick and lock nothing.
func (h *Hub) Publish(kind, model string, v any) uint64 {
	data, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return 0
	}
	h.seq++
	e := Event{ID: h.seq, Kind: kind, Model: model, Data: data}
	if len(h.ring) < h.cfg.Ring {
		h.ring = append(h.ring, e)
	} else {
		h.ring[h.head] = e
		h.head = (h.head + 1) % len(h.ring)
	}
	for s := range h.subs {
		if !s.match(e) {
			continue
		}
		select {
		case s.ch <- e:
		default:
			s.dropped = true
			s.endLocked()
		}
	}
	return e.ID
}

// Subscribe adds a subscriber of the events match accepts (nil: all).
// With after > 0 (a Last-Event-ID) it first returns the kept events after
// that number that match, and gap = true when it cannot: the number is
// older than the ring's oldest kept event, or newer than the last one
// (another process's). The replay and the live events meet with nothing
// lost or repeated.
func (h *Hub) Subscribe(after uint64, match func(Event) bool) (s *Sub, replay []Event, gap bool, err error) {
	if match == nil {
		match = func(Event) bool { return true }
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, false, ErrClosed
	}
	if len(h.subs) >= h.cfg.MaxStreams {
		return nil, nil, false, ErrTooMany
	}
	if after > 0 {
		replay, gap = h.sinceLocked(after, match)
	}
	s = &Sub{h: h, ch: make(chan Event, h.cfg.Buffer), match: match}
	h.subs[s] = struct{}{}
	return s, replay, gap, nil
}

// sinceLocked returns the kept events after number after that match, and
// whether events after it are missing from the ring.
func (h *Hub) sinceLocked(after uint64, match func(Event) bool) ([]Event, bool) {
	if after > h.seq {
		return nil, true
	}
	oldest := h.seq + 1 - uint64(len(h.ring)) // the ring's first number (seq+1 when empty)
	if after+1 < oldest {
		return nil, true
	}
	var out []Event
	for i := range h.ring {
		e := h.ring[(h.head+i)%len(h.ring)]
		if e.ID > after && match(e) {
			out = append(out, e)
		}
	}
	return out, false
}

// Streams is how many subscribers are open.
func (h *Hub) Streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Last is the last event's number.
func (h *Hub) Last() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq
}

// Close ends every subscriber and refuses new ones and new events.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		s.endLocked()
	}
}

// Worker is what the feed compares of a worker between two looks.
type Worker struct{ State, Reason string }

// DiffWorkers returns the worker events that turn prev into cur, sorted
// by worker id: a worker new or in another state is its state now, one
// no longer listed is "gone".
func DiffWorkers(prev, cur map[string]Worker) []api.EventWorker {
	var out []api.EventWorker
	for id, w := range cur {
		if p, ok := prev[id]; !ok || p.State != w.State {
			out = append(out, api.EventWorker{Worker: id, State: w.State, Reason: w.Reason})
		}
	}
	for id := range prev {
		if _, ok := cur[id]; !ok {
			out = append(out, api.EventWorker{Worker: id, State: "gone"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Worker < out[j].Worker })
	return out
}
