package features

import (
	"container/list"
	"sync"
	"time"
)

// memory is the in-process tier of one view: rows by entity, least
// recently used evicted first, bounded in bytes (each entry's key, values,
// timestamp and bookkeeping), each entry served for ttl after a store
// answered it. A store's "unknown entity" is kept as well, so an unknown
// card does not cost a round trip per request.
type memory struct {
	max int64
	ttl time.Duration

	mu    sync.Mutex // guards used, items, lru
	used  int64
	items map[string]*list.Element
	lru   list.List // front: most recently used; values *memEntry
}

type memEntry struct {
	key   string
	row   Row
	until time.Time // served from memory until then
	size  int64
}

// entryOverhead is the bookkeeping of one entry: the map slot, the list
// element, the entry struct and the slice headers (measured roughly with
// runtime.MemStats on 100,000 entries; see TestMemoryBytesBound).
const entryOverhead = 200

func entrySize(key string, nvals int) int64 {
	return int64(entryOverhead + len(key) + 8*nvals)
}

func newMemory(maxBytes int64, ttl time.Duration) *memory {
	return &memory{max: maxBytes, ttl: ttl, items: map[string]*list.Element{}}
}

// get copies the row of key into dst (Values sized) and says whether a
// live entry was there.
func (m *memory) get(key string, now time.Time, dst *Row) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.items[key]
	if !ok {
		return false
	}
	e := el.Value.(*memEntry)
	if !now.Before(e.until) {
		m.removeLocked(el)
		return false
	}
	m.lru.MoveToFront(el)
	dst.Found, dst.At = e.row.Found, e.row.At
	copy(dst.Values, e.row.Values)
	return true
}

// put keeps a copy of row under key, evicting the least recently used
// entries to stay within the bound. An entry larger than the bound is not
// kept.
func (m *memory) put(key string, row Row, now time.Time) {
	size := entrySize(key, len(row.Values))
	if size > m.max {
		return
	}
	vals := append([]float64(nil), row.Values...)
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.items[key]; ok {
		m.removeLocked(el)
	}
	for m.used+size > m.max {
		m.removeLocked(m.lru.Back())
	}
	e := &memEntry{key: key, row: Row{Found: row.Found, Values: vals, At: row.At}, until: now.Add(m.ttl), size: size}
	m.items[key] = m.lru.PushFront(e)
	m.used += size
}

func (m *memory) removeLocked(el *list.Element) {
	e := el.Value.(*memEntry)
	m.lru.Remove(el)
	delete(m.items, e.key)
	m.used -= e.size
}

// bytes is what the tier holds now (its bound is max).
func (m *memory) bytes() (used int64, entries int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used, len(m.items)
}
