// Package predcache is the prediction cache: per model version, the
// answers to rows the version has computed, keyed by the version, the
// caller's tenant and the row, so that an answer is never served to
// another tenant or by another version. A Cache is bounded in bytes (each
// entry counts its key, its outputs and a fixed overhead), forgets answers
// after a TTL, evicts the least recently used entries past its bound, and
// computes concurrent identical misses once (a Flight: the first caller
// computes, the others wait within their own deadline). A Set holds the
// caches of the versions being served; a version's cache is dropped with
// it (Set.Drop, called when the version is unloaded or archived).
//
// It knows no transport, schema, tenant file or model: the gateway builds
// the keys (AppendKey) from the version's id, the tenant's name and the
// row the model would receive, and calls it before admission.
package predcache

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// EntryOverhead is what an entry costs beyond its key and outputs: the
// entry (list links, expiry, slice and string headers, room for 4 outputs
// inline) and its map slot.
const EntryOverhead = 128

// MaxFlightsPerShard bounds the misses being computed that others may
// wait for, per shard (16 shards at most): past it a miss is computed
// without coalescing (Get returns no Flight).
const MaxFlightsPerShard = 1024

// Config is a version's cache: model.yaml cache:.
type Config struct {
	TTL      time.Duration    // > 0
	MaxBytes int64            // > 0
	Now      func() time.Time // nil: time.Now
}

// Cache is one version's prediction cache. Its methods are safe for
// concurrent use.
type Cache struct {
	Model   string // labels of its metrics
	Version string
	id      string // the version's id and content digest (Set)
	digest  string
	prefix  []byte // AppendKey's version part for id and digest (Key)
	ttl     time.Duration
	now     func() time.Time
	seed    maphash.Seed
	shards  []shard
	mask    uint64
	bytes   atomic.Int64
	entries atomic.Int64
}

// shard is a part of a cache with its own lock, bound, LRU list and
// flights.
type shard struct {
	mu      sync.Mutex         // guards everything below
	items   map[string]*entry  // by the full key: a lookup compares every byte
	lru     entry              // sentinel: lru.next is the most recently used
	bytes   int64              // what the entries cost
	max     int64              // the shard's share of MaxBytes
	flights map[string]*Flight // misses being computed
}

type entry struct {
	key        string
	out        []float32 // inline's, for outputs of up to 4 columns
	expires    int64     // unix nanoseconds
	prev, next *entry
	inline     [4]float32
}

func (e *entry) size() int64 { return entrySize(len(e.key), len(e.out)) }

func entrySize(keyLen, outLen int) int64 {
	return int64(keyLen) + 4*int64(outLen) + EntryOverhead
}

// New returns an empty cache of model@version under cfg.
func New(model, version string, cfg Config) *Cache {
	return newCache(model, version, "", "", cfg)
}

func newCache(model, version, id, digest string, cfg Config) *Cache {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// Shards of at least 1 MiB each, up to 16: a shard is the largest
	// entry it can hold.
	n := 1
	for n < 16 && cfg.MaxBytes/int64(2*n) >= 1<<20 {
		n *= 2
	}
	c := &Cache{Model: model, Version: version, id: id, digest: digest, ttl: cfg.TTL, now: cfg.Now, seed: maphash.MakeSeed(),
		shards: make([]shard, n), mask: uint64(n - 1)}
	c.prefix = appendString(appendString(nil, id), digest)
	for i := range c.shards {
		s := &c.shards[i]
		s.items = map[string]*entry{}
		s.flights = map[string]*Flight{}
		s.lru.next, s.lru.prev = &s.lru, &s.lru
		s.max = cfg.MaxBytes / int64(n)
	}
	return c
}

func (c *Cache) shard(key []byte) *shard {
	return &c.shards[maphash.Bytes(c.seed, key)&c.mask]
}

// Bytes is what the cache's entries cost now.
func (c *Cache) Bytes() int64 { return c.bytes.Load() }

// Entries is how many entries the cache holds now (expired ones included
// until they are looked up or evicted).
func (c *Cache) Entries() int64 { return c.entries.Load() }

// Get looks key up. A hit returns the outputs (the caller must not
// change them). A miss returns a Flight: lead says the caller computes the
// row and must end the flight (Done or Fail, exactly once); otherwise
// another caller is computing it and the caller may Wait for it. A miss
// with neither (too many flights) is computed by the caller, who may Put
// the answer.
func (c *Cache) Get(key []byte) (out []float32, f *Flight, lead bool) {
	s := c.shard(key)
	now := c.now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.items[string(key)]; ok {
		if now < e.expires {
			s.unlinkLocked(e)
			s.pushFrontLocked(e)
			return e.out, nil, false
		}
		c.removeLocked(s, e)
	}
	if f, ok := s.flights[string(key)]; ok {
		if f.done == nil {
			f.done = make(chan struct{}) // the first waiter: the leader will close it
		}
		return nil, f, false
	}
	if len(s.flights) >= MaxFlightsPerShard {
		return nil, nil, false
	}
	f = &Flight{c: c, s: s, key: string(key)}
	s.flights[f.key] = f
	return nil, f, true
}

// Put stores out (copied) as key's answer for the TTL. An entry larger
// than a shard's share of MaxBytes is not stored.
func (c *Cache) Put(key []byte, out []float32) {
	s := c.shard(key)
	c.putLocked(s, string(key), out, true)
}

// putLocked stores an entry; lock says s.mu is not held yet.
func (c *Cache) putLocked(s *shard, key string, out []float32, lock bool) *entry {
	size := entrySize(len(key), len(out))
	if size > s.max {
		return nil
	}
	e := &entry{key: key, expires: c.now().Add(c.ttl).UnixNano()}
	if len(out) <= len(e.inline) {
		e.out = append(e.inline[:0], out...)
	} else {
		e.out = append([]float32(nil), out...)
	}
	if lock {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	if old, ok := s.items[key]; ok {
		c.removeLocked(s, old)
	}
	for s.bytes+size > s.max {
		c.removeLocked(s, s.lru.prev) // the least recently used
	}
	s.items[key] = e
	s.pushFrontLocked(e)
	s.bytes += size
	c.bytes.Add(size)
	c.entries.Add(1)
	return e
}

func (c *Cache) removeLocked(s *shard, e *entry) {
	s.unlinkLocked(e)
	delete(s.items, e.key)
	size := e.size()
	s.bytes -= size
	c.bytes.Add(-size)
	c.entries.Add(-1)
}

func (s *shard) unlinkLocked(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (s *shard) pushFrontLocked(e *entry) {
	e.prev, e.next = &s.lru, s.lru.next
	s.lru.next.prev = e
	s.lru.next = e
}

// Flight is a miss being computed: its leader ends it with Done (the
// answer, stored and handed to the waiters) or Fail (the waiters compute
// it themselves).
type Flight struct {
	c    *Cache
	s    *shard
	key  string
	done chan struct{} // made by the first waiter (guarded by s.mu), closed by the end
	out  []float32     // set before done is closed; nil: failed
	over bool          // ended; guarded by s.mu
}

// Done ends the flight with its answer: stored, and handed to the
// waiters. Calls after the first Done or Fail do nothing.
func (f *Flight) Done(out []float32) { f.end(out, true) }

// Fail ends the flight without an answer: the waiters compute the row
// themselves.
func (f *Flight) Fail() { f.end(nil, false) }

func (f *Flight) end(out []float32, ok bool) {
	s := f.s
	s.mu.Lock()
	if f.over {
		s.mu.Unlock()
		return
	}
	f.over = true
	if s.flights[f.key] == f {
		delete(s.flights, f.key)
	}
	if ok {
		if e := f.c.putLocked(s, f.key, out, false); e != nil {
			f.out = e.out // entries' outputs are never changed
		} else {
			f.out = append([]float32{}, out...)
		}
	}
	done := f.done
	s.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// Wait waits for the flight's answer until ctx is done. ok is false when
// the leader failed or ctx ended first: the caller computes the row. Only
// a caller Get gave the flight to as a waiter (lead false) may wait.
func (f *Flight) Wait(ctx context.Context) (out []float32, ok bool) {
	select {
	case <-f.done:
		return f.out, f.out != nil
	case <-ctx.Done():
		return nil, false
	}
}

// Key appends to dst the key of row (or tokens) for tenant in this
// cache: AppendKey with the version's id and digest, as Set.For made it.
func (c *Cache) Key(dst []byte, tenant string, row []float32, tokens []int64) []byte {
	dst = append(dst, c.prefix...)
	return appendRow(appendString(dst, tenant), row, tokens)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendKey appends the key of a row to dst: the version's id and
// content digest, the tenant and the row the model receives (float32 features, or token ids
// for a sequence model), each with its length first, so that two
// different triples never make the same key.
func AppendKey(dst []byte, version, digest, tenant string, row []float32, tokens []int64) []byte {
	dst = appendString(appendString(appendString(dst, version), digest), tenant)
	return appendRow(dst, row, tokens)
}

func appendRow(dst []byte, row []float32, tokens []int64) []byte {
	if tokens != nil {
		dst = append(dst, 't')
		dst = binary.AppendUvarint(dst, uint64(len(tokens)))
		for _, t := range tokens {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(t))
		}
		return dst
	}
	dst = append(dst, 'f')
	dst = binary.AppendUvarint(dst, uint64(len(row)))
	for _, v := range row {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
	}
	return dst
}

// Set is the caches of the versions being served, by version id. Its
// methods are safe for concurrent use.
type Set struct {
	mu     sync.RWMutex      // guards caches
	caches map[string]*Cache // by version id ("fraud@3")
}

// NewSet returns an empty set.
func NewSet() *Set { return &Set{caches: map[string]*Cache{}} }

// For returns the cache of version id (model@version) whose content is
// digest, made with cfg if there is none (keys made by its Key name both); a cache of the same id and
// another digest (the version published again) is replaced.
func (s *Set) For(model string, version int, id, digest string, cfg Config) *Cache {
	s.mu.RLock()
	c := s.caches[id]
	s.mu.RUnlock()
	if c != nil && c.digest == digest {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c = s.caches[id]; c != nil && c.digest == digest {
		return c
	}
	c = newCache(model, strconv.Itoa(version), id, digest, cfg)
	s.caches[id] = c
	return c
}

// Drop forgets version id's cache (the version was unloaded or
// archived): its entries are served no more and their memory is freed
// once no call in flight holds the cache.
func (s *Set) Drop(id string) {
	s.mu.Lock()
	delete(s.caches, id)
	s.mu.Unlock()
}

// State is one cache's figures (metrics).
type State struct {
	Model, Version string
	Entries, Bytes int64
}

// States is every cache's figures now.
func (s *Set) States() []State {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]State, 0, len(s.caches))
	for _, c := range s.caches {
		out = append(out, State{Model: c.Model, Version: c.Version, Entries: c.Entries(), Bytes: c.Bytes()})
	}
	return out
}
