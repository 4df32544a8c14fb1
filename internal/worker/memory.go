package worker

import (
	"fmt"
	"math"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/placement"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/workerpb"
)

// Memory accounting. A version's memory on a worker is the growth of the
// process's RSS over its load (hosting.Start: every replica's runtime load,
// golden examples, warmup), with the garbage collector run and the freed
// heap returned to the OS before and after (debug.FreeOSMemory), so the
// figure is what the loaded version holds, not the load's garbage. Two
// loads that overlap cannot be told apart in one RSS: a load that
// overlapped another reports the estimate instead (serving.memory, else
// placement.Estimate) and says so (memory_measured false). Unloading runs
// FreeOSMemory after the version's models are closed, so what a Go-heap
// runtime held is given back to the OS, not kept by the Go runtime.

// meter tells whether loads overlapped.
type meter struct {
	mu      sync.Mutex // guards running and dirty
	running int
	dirty   map[*loadMark]bool // loads that overlapped another
}

type loadMark struct{}

// begin starts measuring one load: it collects garbage and reads RSS.
func (m *meter) begin() (*loadMark, int64) {
	mk := &loadMark{}
	m.mu.Lock()
	if m.dirty == nil {
		m.dirty = map[*loadMark]bool{}
	}
	m.running++
	if m.running > 1 {
		for k := range m.dirty {
			m.dirty[k] = true
		}
		m.dirty[mk] = true
	} else {
		m.dirty[mk] = false
	}
	m.mu.Unlock()
	debug.FreeOSMemory()
	return mk, RSS()
}

// end finishes measuring: the RSS growth since begin (never negative) and
// whether it is this load's alone.
func (m *meter) end(mk *loadMark, before int64) (int64, bool) {
	debug.FreeOSMemory()
	after := RSS()
	m.mu.Lock()
	m.running--
	alone := !m.dirty[mk]
	delete(m.dirty, mk)
	m.mu.Unlock()
	return max(after-before, 0), alone && before > 0
}

// memoryOf is the memory a loaded version is accounted for: what its
// runtime reports its replicas hold (known: every replica's model is a
// runtime.MemoryReporter), else the RSS growth of its load when that was
// its alone (measured), else the
// estimate (serving.memory, else placement.Estimate), times its replicas.
// A measure is never taken below a floor: serving.memory when declared
// (what its owner says it holds), else the artifact's size. An RSS delta
// can come out far below what a load holds: the allocator reuses pages
// the process already had (seen as 0.0 MiB for an 8 MiB model while
// other versions were unloaded), and a version counted as nothing lets
// placement put more on the worker than its budget.
func memoryOf(grew int64, alone bool, reported int64, known bool, replicas int, declared, artifactBytes int64, runtime string) (int64, bool) {
	if known {
		return reported, true
	}
	n := int64(max(replicas, 1))
	if !alone {
		return n * placement.Estimate(runtime, artifactBytes, declared), false
	}
	floor := artifactBytes
	if declared > 0 {
		floor = declared
	}
	return max(grew, n*floor), true
}

// reserve books the memory of v's load in the worker's budget, or says
// why it does not fit: what the loaded versions hold (measured), plus the
// reservations of the loads running now, plus this load's (serving.memory,
// else placement.Estimate, times its replicas) must be within the budget.
// The control plane reserves before it sends a load too; this is the
// worker's own check on what it measured, so a version whose memory the
// control plane under-estimated cannot push the worker past its budget
// with the next loads (issue 17: 1,152 MiB used of 1 GiB at start, every
// 48 MiB version reserved at a 1 MiB estimate).
func (w *Worker) reserve(v *version, spec *modelpkg.Spec, req *workerpb.LoadRequest, art []byte) error {
	need := int64(max(req.Replicas, 1)) * reservation(spec, art)
	w.mu.Lock()
	defer w.mu.Unlock()
	held := w.heldLocked(v)
	if !fits(w.cfg.MemoryBudget, held, need) {
		return fmt.Errorf("worker %s is at its memory budget: its versions hold %s (measured) and loads under way %s of %s; %s needs about %s",
			w.cfg.ID, placement.Bytes(held.loaded), placement.Bytes(held.loading), placement.Bytes(w.cfg.MemoryBudget), v.id(), placement.Bytes(need))
	}
	v.reserved = need
	return nil
}

// reservation is one replica's memory before its load is measured:
// serving.memory, else what the artifact declares (runtime.MemoryDeclarer),
// else placement.Estimate from the artifact's size.
func reservation(spec *modelpkg.Spec, art []byte) int64 {
	var declared int64
	if m := spec.Manifest.Serving.Memory; m != nil {
		declared = m.Bytes
	} else if rt, err := runtime.Lookup(spec.Manifest.Runtime); err == nil {
		if d, ok := rt.(runtime.MemoryDeclarer); ok {
			declared = d.DeclaredMemory(art)
		}
	}
	return placement.Estimate(spec.Manifest.Runtime, int64(len(art)), declared)
}

// held is a worker's memory as its own loads see it.
type held struct{ loaded, loading int64 }

// heldLocked sums what the versions other than skip hold (measured, once
// loaded) and reserve (while loading).
func (w *Worker) heldLocked(skip *version) held {
	var h held
	for _, u := range w.versions {
		if u == skip {
			continue
		}
		select {
		case <-u.done:
			if u.err == nil {
				h.loaded += u.memory
			}
		default:
			h.loading += u.reserved
		}
	}
	return h
}

// fits says whether a load of need bytes fits a budget with h held (a
// budget of 0 or less: no bound).
func fits(budget int64, h held, need int64) bool {
	return budget <= 0 || h.loaded+h.loading+need <= budget
}

// GoMemoryLimit is the Go runtime's soft memory limit for a worker whose
// versions may hold budget bytes: the budget plus room for the process
// itself (gRPC, buffers, the runtime: a quarter of the budget, at least
// 64 MiB). Without it a runtime that keeps its models on the Go heap (the
// synthetic one, the JSON tree runtimes) lets garbage grow to the heap's
// size again before collecting (GOGC=100), so the RSS of a worker near
// its budget would be about twice what placement counts; with it the
// collector works harder as the process nears the limit instead. 0 or
// less: no limit.
func GoMemoryLimit(budget int64) int64 {
	if budget <= 0 {
		return math.MaxInt64
	}
	return budget + max(64<<20, budget/4)
}

// Budget is the worker's memory budget (Config.MemoryBudget, or the
// default it found).
func (w *Worker) Budget() int64 { return w.cfg.MemoryBudget }

// giveBack returns freed heap to the OS (after an unload).
func giveBack() {
	goruntime.GC()
	debug.FreeOSMemory()
}

// Budget files, read by DefaultBudget.
const (
	cgroupMemoryMax = "/sys/fs/cgroup/memory.max"
	procMeminfo     = "/proc/meminfo"
)

// DefaultBudget is a worker's memory budget when --worker-memory is not
// given: the cgroup v2 limit of the process (memory.max) when one is set,
// else the host's MemTotal, divided by workersOnHost (the workers that
// share that memory; 0 or 1: a lone worker takes it all). It returns the
// budget and where it came from ("" and 0 when neither is readable).
func DefaultBudget(workersOnHost int) (int64, string) {
	cg, _ := os.ReadFile(cgroupMemoryMax)
	mi, _ := os.ReadFile(procMeminfo)
	return budgetFrom(string(cg), string(mi), workersOnHost)
}

// budgetFrom is DefaultBudget on the files' contents.
func budgetFrom(cgroupMax, meminfo string, workersOnHost int) (int64, string) {
	n := max(workersOnHost, 1)
	var total int64
	var source string
	if v, err := strconv.ParseInt(strings.TrimSpace(cgroupMax), 10, 64); err == nil && v > 0 {
		total, source = v, "cgroup memory.max"
	} else {
		for _, line := range strings.Split(meminfo, "\n") {
			rest, ok := strings.CutPrefix(line, "MemTotal:")
			if !ok {
				continue
			}
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb > 0 {
					total, source = kb<<10, "host MemTotal"
				}
			}
		}
	}
	if total == 0 {
		return 0, ""
	}
	if n > 1 {
		source = fmt.Sprintf("%s / %d workers", source, n)
	}
	return total / int64(n), source
}
