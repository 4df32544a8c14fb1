package jobs

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluiceml/sluice/internal/jobs/jobio"
)

// memStore is the tests' Store: a map under a mutex, leases on time.Now
// (fake inside a synctest bubble). It keeps what the Store interface says
// and nothing more.
type memStore struct {
	mu     sync.Mutex
	jobs   map[string]*memJob
	seq    int
	failOn map[string]int // method → calls left that fail (a store outage)
}

type memJob struct {
	j      Job
	seq    int
	chunks []memChunk
}

type memChunk struct {
	start   jobio.Start
	done    bool
	owner   string
	until   time.Time
	claimed bool
	claims  int
}

func newMemStore() *memStore { return &memStore{jobs: map[string]*memJob{}, failOn: map[string]int{}} }

func (s *memStore) fail(method string) error {
	if s.failOn[method] > 0 {
		s.failOn[method]--
		return fmt.Errorf("memstore: %s failed (injected)", method)
	}
	return nil
}

func (s *memStore) Create(_ context.Context, j Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("Create"); err != nil {
		return err
	}
	if _, ok := s.jobs[j.ID]; ok {
		return fmt.Errorf("job %s: %w", j.ID, ErrExists)
	}
	s.seq++
	j.State = Queued
	s.jobs[j.ID] = &memJob{j: j, seq: s.seq}
	return nil
}

func (s *memStore) Get(_ context.Context, id string) (Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("Get"); err != nil {
		return Job{}, err
	}
	mj, ok := s.jobs[id]
	if !ok {
		return Job{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	j := mj.j
	j.Errors = append([]RowError(nil), j.Errors...)
	return j, nil
}

func (s *memStore) List(_ context.Context, o ListOptions) ([]Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*memJob
	for _, mj := range s.jobs {
		all = append(all, mj)
	}
	sort.Slice(all, func(a, b int) bool { return all[a].seq > all[b].seq })
	limit := o.Limit
	if limit == 0 {
		limit = 100
	}
	var out []Job
	before := o.Before == ""
	for _, mj := range all {
		if !before {
			before = mj.j.ID == o.Before
			continue
		}
		if (o.Tenant != "" && mj.j.Spec.Tenant != o.Tenant) || (o.State != "" && mj.j.State != o.State) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, mj.j)
	}
	return out, nil
}

func (s *memStore) SetScan(_ context.Context, id string, rows int64, chunks []jobio.Start, errs []RowError) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	mj, ok := s.jobs[id]
	if !ok {
		return ErrNotFound
	}
	if mj.j.Scanned {
		return nil
	}
	mj.j.Scanned, mj.j.RowsTotal, mj.j.ChunksTotal = true, rows, len(chunks)
	for _, c := range chunks {
		mj.chunks = append(mj.chunks, memChunk{start: c})
	}
	mj.j.Errors = append(mj.j.Errors, errs[:min(len(errs), MaxErrorsKept)]...)
	return nil
}

func (s *memStore) Claim(_ context.Context, id, owner string, shard, shards int, lease time.Duration) (Claim, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("Claim"); err != nil {
		return Claim{}, false, err
	}
	mj, ok := s.jobs[id]
	if !ok {
		return Claim{}, false, ErrNotFound
	}
	now := time.Now()
	for i := range mj.chunks {
		c := &mj.chunks[i]
		if c.done || i%shards != shard || (c.owner != "" && now.Before(c.until)) {
			continue
		}
		redone := c.claimed
		c.owner, c.until, c.claimed = owner, now.Add(lease), true
		c.claims++
		return Claim{Job: id, Chunk: i, Start: c.start, Owner: owner, Until: c.until, Redone: redone}, true, nil
	}
	return Claim{}, false, nil
}

func (s *memStore) Renew(_ context.Context, id string, chunk int, owner string, lease time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("Renew"); err != nil {
		return err
	}
	mj, ok := s.jobs[id]
	if !ok || chunk >= len(mj.chunks) {
		return ErrNotFound
	}
	c := &mj.chunks[chunk]
	now := time.Now()
	if c.done || c.owner != owner || !now.Before(c.until) {
		return ErrLeaseLost
	}
	c.until = now.Add(lease)
	return nil
}

func (s *memStore) Complete(_ context.Context, id string, chunk int, owner string, r ChunkResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("Complete"); err != nil {
		return err
	}
	mj, ok := s.jobs[id]
	if !ok || chunk >= len(mj.chunks) {
		return ErrNotFound
	}
	c := &mj.chunks[chunk]
	if c.done {
		return nil
	}
	if c.owner != owner {
		return ErrLeaseLost
	}
	c.done = true
	j := &mj.j
	j.ChunksDone++
	j.RowsDone += r.Rows
	j.RowsFailed += r.Failed
	if c.claims > 1 {
		j.RowsRedone += r.Rows
	}
	for _, e := range r.Errors {
		if len(j.Errors) < MaxErrorsKept {
			j.Errors = append(j.Errors, e)
		}
	}
	j.Updated = time.Now()
	return nil
}

func (s *memStore) SetState(_ context.Context, id string, from []State, to State, message string, incomplete bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fail("SetState"); err != nil {
		return false, err
	}
	mj, ok := s.jobs[id]
	if !ok {
		return false, ErrNotFound
	}
	j := &mj.j
	okFrom := false
	for _, f := range from {
		okFrom = okFrom || j.State == f
	}
	if !okFrom {
		return false, nil
	}
	now := time.Now()
	j.State, j.Message, j.Incomplete, j.Updated = to, message, incomplete, now
	if to == Running && j.Started.IsZero() {
		j.Started = now
	}
	if Final(to) {
		j.Finished = now
	}
	return true, nil
}

func (s *memStore) RequestCancel(_ context.Context, id string) (Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mj, ok := s.jobs[id]
	if !ok {
		return Job{}, ErrNotFound
	}
	if !Final(mj.j.State) {
		mj.j.CancelRequested = true
	}
	return mj.j, nil
}

func (s *memStore) Runnable(_ context.Context, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*memJob
	for _, mj := range s.jobs {
		if mj.j.State == Queued || mj.j.State == Running {
			all = append(all, mj)
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a].seq < all[b].seq })
	var out []string
	for _, mj := range all[:min(len(all), limit)] {
		out = append(out, mj.j.ID)
	}
	return out, nil
}

func (s *memStore) Close() error { return nil }

// chunkOwners lists the chunks' owners ("" none, "done").
func (s *memStore) chunkOwners(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, c := range s.jobs[id].chunks {
		if c.done {
			b.WriteString("done ")
		} else {
			b.WriteString(c.owner + " ")
		}
	}
	return b.String()
}
