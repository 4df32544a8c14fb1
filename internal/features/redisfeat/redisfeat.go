// Package redisfeat is the Redis feature store (a features.Source, Filler
// and Pinger): view VIEW's features of entity ENTITY are the hash at
// VIEW:ENTITY, one field per feature holding a decimal string, plus an
// optional _ts (Unix seconds, fractions allowed) that staleness is judged
// by. A lookup of N entities is one pipelined round trip of N HMGETs (N
// HGETALLs for a view of more than HMGetMax fields); a
// read-through fill is one pipeline of HSET + EXPIRE per entity. Every
// call is bounded by its context's deadline (the enrichment's share of
// the request's), never by a wait of the client's own.
//
// The client is github.com/redis/rueidis v1.0.79, chosen by measurement
// against github.com/redis/go-redis/v9 v9.23.0 (bench/redisclient, one
// pipelined round trip of N HMGETs of 50 fields against Debian's
// redis-server 7.0 on this 2-core machine, shared and loaded, 3,000 round
// trips per cell, docs/benchmarks.md "Issue 19"): at N=1 the two are
// within the machine's noise in latency (p50 41–56 µs against 51–63 µs)
// but rueidis allocates 55 objects (2.2 KB) per round trip against
// go-redis's 164 (3.8 KB); at N=100, 5,106 against 15,418 objects (296
// against 441 KB), with p50 4.8–6.0 ms either way on the loaded machine.
// Fewer allocations are less GC work on the gateway's hot path, which
// runs the model's preprocessing on the same cores. rueidis also speaks
// RESP3 and has server-assisted client-side caching; Sluice does not use
// it (DisableCache): its cache is bounded per connection, not per view in
// bytes, and its entries know nothing of _ts, so the memory tier is
// features' own.
package redisfeat

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluiceml/sluice/internal/features"
)

// TSField is the hash field holding the values' time (Unix seconds).
const TSField = "_ts"

// FillTTL is how long a hash written by a read-through fill lives (the
// database stays the source of truth; loaded hashes have no TTL unless
// the loader sets one).
const FillTTL = time.Hour

// Source is the Redis feature store at one URL. The client is made at
// Open if Redis answers, else by the first Ping that reaches it (the
// breaker probes it while it is open), so a gateway starts while Redis is
// down and serves defaults until it is up.
type Source struct {
	opt rueidis.ClientOption
	url string

	mu     sync.Mutex // guards client
	client rueidis.Client
}

// Open parses rawURL (redis://[user:password@]HOST:PORT[/DB]) and tries to
// connect within ctx. A bad URL is an error naming --features-redis; an
// unreachable server is not (see Source).
func Open(ctx context.Context, rawURL string) (*Source, error) {
	opt, err := rueidis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--features-redis %s: not a Redis URL (redis://HOST:PORT/DB): %v", redact(rawURL), err)
	}
	opt.DisableCache = true
	opt.Dialer.Timeout = time.Second
	// A connection that answers nothing for a second is closed and dialed
	// again (a stopped or vanished server), whatever the callers' contexts.
	opt.ConnWriteTimeout = time.Second
	opt.DisableRetry = true
	// RESP2: HGETALL answers a flat array read in place, where RESP3's map
	// costs a Go map per entity (client-side caching, which needs RESP3,
	// is not used).
	opt.AlwaysRESP2 = true
	s := &Source{opt: opt, url: redact(rawURL)}
	_ = s.Ping(ctx)
	return s, nil
}

// URL is the store's URL without its password.
func (s *Source) URL() string { return s.url }

func redact(raw string) string {
	if i := strings.Index(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + "xxxxx" + raw[i:]
		}
	}
	return raw
}

var errNotConnected = errors.New("redis: not connected")

func (s *Source) get() rueidis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// Ping checks the server answers, connecting first if need be.
func (s *Source) Ping(ctx context.Context) error {
	c := s.get()
	if c == nil {
		opt := s.opt
		if dl, ok := ctx.Deadline(); ok {
			opt.Dialer.Timeout = max(time.Until(dl), time.Millisecond)
		}
		nc, err := rueidis.NewClient(opt)
		if err != nil {
			return fmt.Errorf("redis %s: %w", s.url, err)
		}
		s.mu.Lock()
		if s.client == nil {
			s.client = nc
		} else {
			nc.Close()
		}
		c = s.client
		s.mu.Unlock()
	}
	return c.Do(ctx, c.B().Ping().Build()).Error()
}

// Close closes the client.
func (s *Source) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
}

// Key is the hash of entity in view.
func Key(view, entity string) string { return view + ":" + entity }

// Lookup reads the view's fields and _ts of each entity: one pipeline.
func (s *Source) Lookup(ctx context.Context, v *features.View, entities []string, out []features.Row) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c := s.get()
	if c == nil {
		return errNotConnected
	}
	if len(entities) == 0 {
		return c.Do(ctx, c.B().Ping().Build()).Error()
	}
	if len(v.Fields) > HMGetMax {
		return s.lookupAll(ctx, c, v, entities, out)
	}
	fields := make([]string, 0, len(v.Fields)+1)
	fields = append(fields, v.Fields...)
	fields = append(fields, TSField)
	cmds := make(rueidis.Commands, len(entities))
	for i, e := range entities {
		cmds[i] = c.B().Hmget().Key(Key(v.Name, e)).Field(fields...).Build()
	}
	res := c.DoMulti(ctx, cmds...)
	for i, r := range res {
		vals, err := r.ToArray()
		if err != nil {
			return fmt.Errorf("redis HMGET %s: %w", Key(v.Name, entities[i]), err)
		}
		row := &out[i]
		row.Found, row.At = false, time.Time{}
		for k := range row.Values {
			row.Values[k] = math.NaN()
		}
		for k := range vals {
			if vals[k].IsNil() {
				continue
			}
			str, err := vals[k].ToString()
			if err != nil {
				continue
			}
			row.Found = true
			f, ok := features.ParseValue(str)
			if !ok {
				continue // not a number: absent, as the doc says
			}
			if k == len(v.Fields) {
				sec, frac := math.Modf(f)
				row.At = time.Unix(int64(sec), int64(frac*1e9))
			} else if k < len(row.Values) {
				row.Values[k] = f
			}
		}
	}
	return nil
}

// HMGetMax is the most fields a lookup reads with HMGET; a view with more
// reads whole hashes with HGETALL and picks its fields out. In a hash
// Redis keeps as a listpack (up to 128 fields by default) every HMGET
// field is a scan of the hash, so 51 of them cost redis-server 53 µs a
// call on the test VM against HGETALL's 7.1 µs (INFO commandstats,
// docs/benchmarks.md "Issue 19"); with few fields HMGET sends less back.
const HMGetMax = 8

// lookupAll is Lookup with HGETALL: one pipeline, the view's fields
// picked out of each hash by name.
func (s *Source) lookupAll(ctx context.Context, c rueidis.Client, v *features.View, entities []string, out []features.Row) error {
	idx := make(map[string]int, len(v.Fields)+1)
	for k, f := range v.Fields {
		idx[f] = k
	}
	idx[TSField] = len(v.Fields)
	cmds := make(rueidis.Commands, len(entities))
	for i, e := range entities {
		cmds[i] = c.B().Hgetall().Key(Key(v.Name, e)).Build()
	}
	for i, r := range c.DoMulti(ctx, cmds...) {
		vals, err := r.ToArray()
		if err != nil {
			// RESP3 answers HGETALL with a map.
			m, merr := r.AsStrMap()
			if merr != nil {
				return fmt.Errorf("redis HGETALL %s: %w", Key(v.Name, entities[i]), err)
			}
			setRow(&out[i], len(v.Fields), func(yield func(string, string) bool) {
				for k, x := range m {
					if !yield(k, x) {
						return
					}
				}
			}, idx)
			continue
		}
		setRow(&out[i], len(v.Fields), func(yield func(string, string) bool) {
			for j := 0; j+1 < len(vals); j += 2 {
				k, err1 := vals[j].ToString()
				x, err2 := vals[j+1].ToString()
				if err1 == nil && err2 == nil && !yield(k, x) {
					return
				}
			}
		}, idx)
	}
	return nil
}

// setRow fills row from a hash's field/value pairs: the view's fields
// (by idx; nfields is the _ts index) and _ts.
func setRow(row *features.Row, nfields int, pairs func(yield func(string, string) bool), idx map[string]int) {
	row.Found, row.At = false, time.Time{}
	for k := range row.Values {
		row.Values[k] = math.NaN()
	}
	for k, x := range pairs {
		row.Found = true
		j, ok := idx[k]
		if !ok {
			continue
		}
		f, ok := features.ParseValue(x)
		if !ok {
			continue
		}
		if j == nfields {
			sec, frac := math.Modf(f)
			row.At = time.Unix(int64(sec), int64(frac*1e9))
		} else if j < len(row.Values) {
			row.Values[j] = f
		}
	}
}

// Fill writes rows (the found ones) to their hashes, absent values left
// out, with _ts when known, each expiring after FillTTL: one pipeline.
func (s *Source) Fill(ctx context.Context, v *features.View, entities []string, rows []features.Row) error {
	c := s.get()
	if c == nil {
		return errNotConnected
	}
	var cmds rueidis.Commands
	for i, e := range entities {
		r := rows[i]
		if !r.Found {
			continue
		}
		key := Key(v.Name, e)
		fv := c.B().Hset().Key(key).FieldValue()
		n := 0
		for k, f := range v.Fields {
			if k < len(r.Values) && !math.IsNaN(r.Values[k]) {
				fv = fv.FieldValue(f, features.FormatValue(r.Values[k]))
				n++
			}
		}
		if !r.At.IsZero() {
			fv = fv.FieldValue(TSField, features.FormatValue(float64(r.At.UnixNano())/1e9))
			n++
		}
		if n == 0 {
			continue
		}
		cmds = append(cmds, fv.Build(), c.B().Expire().Key(key).Seconds(int64(FillTTL/time.Second)).Build())
	}
	if len(cmds) == 0 {
		return nil
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("redis fill: %w", err)
		}
	}
	return nil
}
