package cluster

import (
	"hash/fnv"
	"sort"
)

// Shard returns the k workers of ids that hold model: the k with the
// highest rendezvous score of (model, worker id), best first. A model's
// shard stays put as other workers come and go (only a worker that joins
// with a higher score, or a member that leaves, changes it), and two models
// share all their workers only when their scores happen to agree, so a
// model that crashes its workers takes down its shard, not the fleet.
func Shard(model string, ids []string, k int) []string {
	type scored struct {
		id    string
		score uint64
	}
	s := make([]scored, 0, len(ids))
	for _, id := range ids {
		s = append(s, scored{id, rendezvous(model, id)})
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].score != s[j].score {
			return s[i].score > s[j].score
		}
		return s[i].id < s[j].id
	})
	k = min(max(k, 1), len(s))
	out := make([]string, k)
	for i := range out {
		out[i] = s[i].id
	}
	return out
}

func rendezvous(model, id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(id))
	x := h.Sum64()
	// splitmix64 finalizer: FNV alone spreads similar ids poorly.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
