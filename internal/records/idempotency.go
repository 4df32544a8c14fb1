package records

import (
	"container/list"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// Kind says what Begin found for a request id.
type Kind int

const (
	// New: nothing known; the caller computes the answer and must then call
	// Complete or Abort.
	New Kind = iota
	// Replay: the answer is known; return Outcome.Response byte for byte,
	// with the header Idempotent-Replay: true.
	Replay
	// Conflict: the id was used with different input; answer 409
	// idempotency_conflict.
	Conflict
	// InFlight: the same id and input are being computed; Outcome.Wait
	// waits for the answer.
	InFlight
)

func (k Kind) String() string {
	switch k {
	case New:
		return "new"
	case Replay:
		return "replay"
	case Conflict:
		return "conflict"
	case InFlight:
		return "in_flight"
	}
	return "unknown"
}

// ErrAborted is Wait's error when the first attempt ended without an answer
// worth replaying (it was refused, failed, or aborted). Call Begin again:
// the retry is admitted afresh.
var ErrAborted = errors.New("records: the original request ended without a replayable answer")

// Response is a stored answer: encoded bytes (Header, Body), or a value
// the caller renders itself (Value: the gateway keeps a transport-neutral
// answer so that every transport replays it in its own encoding).
type Response struct {
	Status int
	Header http.Header // the subset the caller chose to keep (Content-Type, …)
	Body   []byte
	Value  any
	// Size is how many bytes Value holds (its outputs and strings), which
	// only the caller knows; the cache adds Header, Body and its own
	// bookkeeping, and counts the sum against its byte bound.
	Size int
}

// entryOverhead approximates what an entry costs beyond its answer: the
// map slot, the list element, the entry and the key strings' headers.
const entryOverhead = 256

// size is what an entry holding r for key k and hash costs the cache.
func (r Response) size(k key, hash string) int64 {
	n := int64(entryOverhead + len(k.tenant) + len(k.id) + len(hash) + len(r.Body) + r.Size)
	for name, vs := range r.Header {
		n += int64(len(name))
		for _, v := range vs {
			n += int64(len(v))
		}
	}
	return n
}

// Cacheable says whether an answer with status is kept for replay: answers
// that a retry would get again. 2xx and the final validation errors 400,
// 413, 415 and 422 are; refusals and transient failures (408, 429, 5xx)
// are not, so a retry is admitted afresh; neither are 401/403/404/409,
// which can change as credentials and models change.
func Cacheable(status int) bool {
	switch {
	case status >= 200 && status < 300:
		return true
	case status == http.StatusBadRequest, status == http.StatusRequestEntityTooLarge,
		status == http.StatusUnsupportedMediaType, status == http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// Outcome is Begin's answer.
type Outcome struct {
	Kind     Kind
	Response Response // Replay only
	e        *entry   // InFlight: the entry to wait on
}

// Wait waits for an InFlight request's answer: its Response, ErrAborted if
// it ended without one (call Begin again), or ctx's error. For Replay it
// returns the response at once.
func (o Outcome) Wait(ctx context.Context) (Response, error) {
	switch o.Kind {
	case Replay:
		return o.Response, nil
	case InFlight:
	default:
		return Response{}, errors.New("records: Wait on an outcome that is not in flight")
	}
	select {
	case <-o.e.done:
		if o.e.aborted {
			return Response{}, ErrAborted
		}
		return o.e.resp, nil
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
}

type key struct{ tenant, id string }

type entry struct {
	key  key
	hash string
	done chan struct{} // closed when completed or aborted
	// Set before done is closed, read after.
	resp    Response
	aborted bool
	expires time.Time     // completed entries only
	elem    *list.Element // in Idempotency.doneList once completed
	size    int64         // completed entries only: what it counts against maxBytes
}

// Idempotency remembers answers by (tenant, request id) for a window, so a
// retried request gets the first answer instead of a second computation. A
// request id of one tenant never matches another tenant's. It is bounded
// twice: at most maxEntries ids, and at most maxBytes held by completed
// answers (Response.size); the oldest answers go first, and an answer
// larger than the whole byte bound is not kept.
type Idempotency struct {
	window   time.Duration
	max      int
	maxBytes int64
	// Now is the clock; tests replace it before use.
	Now func() time.Time
	// Started is when the cache began remembering (NewIdempotency: now);
	// answers given before it are only in the records store. Tests may
	// set it with Now.
	Started time.Time

	mu       sync.Mutex // guards entries, doneList and bytes
	entries  map[key]*entry
	doneList *list.List // completed entries, oldest completion first
	evicted  time.Time  // the latest window end of an answer evicted before it expired
	bytes    int64      // sum of the completed entries' sizes
}

// Idempotency defaults.
const (
	DefaultWindow     = 10 * time.Minute
	DefaultMaxEntries = 100000
	DefaultMaxBytes   = 64 << 20
)

// NewIdempotency returns a cache keeping answers for window (default 10m),
// at most maxEntries ids (default 100000) and at most maxBytes of answers
// (default 64 MiB); the oldest answers go first.
func NewIdempotency(window time.Duration, maxEntries int, maxBytes int64) *Idempotency {
	if window <= 0 {
		window = DefaultWindow
	}
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Idempotency{window: window, max: maxEntries, maxBytes: maxBytes, Now: time.Now, Started: time.Now(), entries: map[key]*entry{}, doneList: list.New()}
}

// Begin looks (tenant, requestID) up. A New outcome reserves the id: the
// caller must call Complete or Abort. When every slot holds a request still
// in flight, Begin answers New without reserving (the request runs
// uncached; Complete and Abort are then no-ops).
func (c *Idempotency) Begin(tenant, requestID, inputHash string) Outcome {
	k := key{tenant, requestID}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	c.expireLocked(now)
	if e, ok := c.entries[k]; ok {
		switch {
		case e.hash != inputHash:
			return Outcome{Kind: Conflict}
		case e.elem == nil:
			return Outcome{Kind: InFlight, e: e}
		default:
			return Outcome{Kind: Replay, Response: e.resp}
		}
	}
	if len(c.entries) >= c.max {
		if front := c.doneList.Front(); front != nil {
			if e := front.Value.(*entry); e.expires.After(c.evicted) {
				c.evicted = e.expires
			}
			c.removeLocked(front.Value.(*entry))
		} else {
			return Outcome{Kind: New}
		}
	}
	c.entries[k] = &entry{key: k, hash: inputHash, done: make(chan struct{})}
	return Outcome{Kind: New}
}

// Complete stores the answer of a request Begin answered New for, and wakes
// its waiters. Answers that are not Cacheable are not stored: Complete then
// acts as Abort. header is copied; body is kept as given (do not modify it).
func (c *Idempotency) Complete(tenant, requestID string, status int, header http.Header, body []byte) {
	c.Keep(tenant, requestID, Response{Status: status, Header: header.Clone(), Body: body})
}

// Keep is Complete with a whole Response (its Value included); r is kept
// as given. The oldest answers are dropped until r fits the byte bound; an
// answer larger than the whole bound is not kept (Keep acts as Abort: a
// retry computes again).
func (c *Idempotency) Keep(tenant, requestID string, r Response) {
	if !Cacheable(r.Status) {
		c.Abort(tenant, requestID)
		return
	}
	k := key{tenant, requestID}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || e.elem != nil {
		return
	}
	size := r.size(k, e.hash)
	if size > c.maxBytes {
		e.aborted = true
		c.removeLocked(e)
		return
	}
	for c.bytes+size > c.maxBytes {
		old := c.doneList.Front().Value.(*entry) // non-empty: bytes > 0
		if old.expires.After(c.evicted) {
			c.evicted = old.expires // the store must answer its retries (MayHaveForgotten)
		}
		c.removeLocked(old)
	}
	e.resp = r
	e.size = size
	c.bytes += size
	e.expires = c.Now().Add(c.window)
	e.elem = c.doneList.PushBack(e)
	close(e.done)
}

// Abort forgets a request Begin answered New for, without an answer; its
// waiters get ErrAborted and the next Begin is New.
func (c *Idempotency) Abort(tenant, requestID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key{tenant, requestID}]
	if !ok || e.elem != nil {
		return
	}
	e.aborted = true
	c.removeLocked(e)
}

// MayHaveForgotten reports whether a New outcome at now can hide an answer
// still inside its window that this cache does not hold: while the window
// that began when the cache started has not passed (answers given before a
// restart), or while an answer evicted from the full cache would still be
// replayed. Only then is the records store worth asking.
func (c *Idempotency) MayHaveForgotten(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return now.Before(c.Started.Add(c.window)) || now.Before(c.evicted)
}

// Window is how long an answer is replayed.
func (c *Idempotency) Window() time.Duration { return c.window }

// Len is how many ids the cache holds (in flight and completed).
func (c *Idempotency) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Bytes is what the completed answers the cache holds count against its
// byte bound.
func (c *Idempotency) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// expireLocked drops completed entries whose window has passed. Completion
// order is expiry order, so it stops at the first live one.
func (c *Idempotency) expireLocked(now time.Time) {
	for f := c.doneList.Front(); f != nil; f = c.doneList.Front() {
		e := f.Value.(*entry)
		if now.Before(e.expires) {
			return
		}
		c.removeLocked(e)
	}
}

// removeLocked deletes e; an in-flight e's waiters are released (the
// caller sets aborted first).
func (c *Idempotency) removeLocked(e *entry) {
	delete(c.entries, e.key)
	if e.elem != nil {
		c.doneList.Remove(e.elem)
		c.bytes -= e.size
		return
	}
	close(e.done)
}
