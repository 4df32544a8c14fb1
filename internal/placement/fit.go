package placement

import (
	"cmp"
	"slices"
	"time"
)

// Worker is one live worker as placement sees it.
type Worker struct {
	ID string
	// Budget is the bytes its versions may hold (sluice worker
	// --worker-memory); Used is what they hold now (the sum of their
	// measured memory).
	Budget, Used int64
	Loaded       []Resident
}

// Free is what the worker can still take without evicting: Budget - Used
// (negative when over-committed).
func (w Worker) Free() int64 { return w.Budget - w.Used }

// Request is one version whose replicas need workers.
type Request struct {
	Key string // "model@n"; its own replicas on a worker are never victims
	// Memory is one replica's memory (measured, else serving.memory, else
	// Estimate).
	Memory int64
	// Replicas to add.
	Replicas int
	// Ranked is every worker id in rendezvous order for the model
	// (cluster.Shard(model, ids, len(ids))); its first ShardSize are the
	// shard, the rest the order the shard grows in.
	Ranked    []string
	ShardSize int
	// Rate is the requests per second the new copies would take (the
	// version's rate over its copies; Priceless for a hot version): they
	// displace only residents called less (Displaces).
	Rate float64
	// ForRequest: a request waits for this load (a cold version's first
	// request, or an evicted one's): victims follow KeepFor's rules for a
	// request (start copies nobody called may go, young as they are).
	ForRequest bool
}

// Assignment is one worker's part of a Decision.
type Assignment struct {
	Worker   string
	Replicas int
	// Evict is what to unload there before loading (may be empty).
	Evict []string
}

// Decision is Choose's answer.
type Decision struct {
	Assignments []Assignment // in the order the workers were first chosen
	// ShardSize is the shard's size after the decision: larger than
	// Request.ShardSize when the shard had to grow (Grown lists the
	// workers it grew by, in rendezvous order).
	ShardSize int
	Grown     []string
	// Unplaced is the replicas no worker could take, even after eviction
	// and growing the shard to every worker (0: all placed).
	Unplaced int
}

// slot is a worker's state while Choose works.
type slot struct {
	w      Worker
	rank   int
	free   int64
	mine   int             // replicas of the request here (existing + chosen)
	left   []Resident      // not yet chosen as victims
	evict  []string        // chosen victims, in order
	placed int             // replicas chosen here
	gone   map[string]bool // victims chosen here
}

// Choose places req's replicas one at a time on the workers of its shard,
// and says what to evict first. For each replica the shard's workers are
// ranked:
//
//  1. those that can take it without evicting (free >= Memory) first;
//  2. then fewer replicas of this version already there (spread, so one
//     worker's death costs few of its replicas);
//  3. then, among those that must evict, the lowest reload cost of what
//     they would evict (the sum of ReloadCost of the victims);
//  4. then the most free memory;
//  5. then shard (rendezvous) order.
//
// Only residents the request displaces (Displaces: called less than
// the request would be, or not called) are candidate victims at all.
// If the best can only take it by evicting, Policy.Victims on that
// worker chooses what (for the missing bytes only); a worker whose
// evictable versions cannot free enough is not a candidate. When no
// worker of the shard can take the replica even after eviction, the shard
// grows by the next worker in Ranked order that is live (in workers) and
// the replica is tried again; Decision.ShardSize and Grown report the
// growth, Unplaced what no worker could take. workers lists the live
// workers (ids in Ranked that are missing are down and skipped).
func (p Policy) Choose(req Request, workers []Worker, now time.Time) Decision {
	byID := make(map[string]Worker, len(workers))
	for _, w := range workers {
		byID[w.ID] = w
	}
	size := min(max(req.ShardSize, 1), len(req.Ranked))
	d := Decision{ShardSize: size}
	var slots []*slot
	add := func(i int) {
		w, ok := byID[req.Ranked[i]]
		if !ok {
			return
		}
		s := &slot{w: w, rank: i, free: w.Free(), gone: map[string]bool{}}
		for _, r := range w.Loaded {
			if r.Key == req.Key {
				s.mine += r.Replicas
				continue
			}
			if p.Displaces(req.Rate, r, now) {
				s.left = append(s.left, r)
			}
		}
		slots = append(slots, s)
	}
	for i := range size {
		add(i)
	}
	var order []*slot // first chosen first
	for range max(req.Replicas, 0) {
		for {
			if s := p.best(slots, req.Memory, req.ForRequest, now); s != nil {
				if s.placed == 0 {
					order = append(order, s)
				}
				if s.free < req.Memory {
					ev := p.VictimsFor(s.left, req.Memory-s.free, now, req.ForRequest)
					for _, k := range ev.Victims {
						s.gone[k] = true
					}
					s.evict = append(s.evict, ev.Victims...)
					s.left = slices.DeleteFunc(s.left, func(r Resident) bool { return s.gone[r.Key] })
					s.free += ev.Freed
				}
				s.free -= req.Memory
				s.mine++
				s.placed++
				break
			}
			if d.ShardSize >= len(req.Ranked) {
				d.Unplaced++
				break
			}
			d.Grown = append(d.Grown, req.Ranked[d.ShardSize])
			add(d.ShardSize)
			d.ShardSize++
		}
	}
	for _, s := range order {
		d.Assignments = append(d.Assignments, Assignment{Worker: s.w.ID, Replicas: s.placed, Evict: s.evict})
	}
	return d
}

// best is the slot that takes the next replica of mem bytes, or nil when
// none can even after eviction.
func (p Policy) best(slots []*slot, mem int64, forRequest bool, now time.Time) *slot {
	type cand struct {
		s    *slot
		fits bool    // without eviction
		cost float64 // the reload cost of what would be evicted
	}
	var cands []cand
	for _, s := range slots {
		if s.free >= mem {
			cands = append(cands, cand{s: s, fits: true})
			continue
		}
		ev := p.VictimsFor(s.left, mem-s.free, now, forRequest)
		if !ev.Enough {
			continue
		}
		c := cand{s: s}
		for _, k := range ev.Victims {
			for _, r := range s.left {
				if r.Key == k {
					c.cost += ReloadCost(r)
				}
			}
		}
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		return nil
	}
	return slices.MinFunc(cands, func(a, b cand) int {
		if a.fits != b.fits {
			if a.fits {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.s.mine, b.s.mine); c != 0 {
			return c
		}
		if c := cmp.Compare(a.cost, b.cost); c != 0 {
			return c
		}
		if c := cmp.Compare(b.s.free, a.s.free); c != 0 {
			return c
		}
		return cmp.Compare(a.s.rank, b.s.rank)
	}).s
}
