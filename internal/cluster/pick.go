package cluster

// PickTwo is the power of two choices: of candidates i and j (indexes into
// load), the one with the lesser load, i on a tie. load is each candidate's
// queue work in instances: what its last heartbeat reported queued for the
// version plus what this gateway has sent it and not yet had answered.
func PickTwo(load []int64, i, j int) int {
	if load[j] < load[i] {
		return j
	}
	return i
}

// twoOf returns two distinct indexes in [0, n) for n >= 2, from r (a random
// source's next value).
func twoOf(n int, r uint64) (int, int) {
	i := int(r % uint64(n))
	j := int((r / uint64(n)) % uint64(n-1))
	if j >= i {
		j++
	}
	return i, j
}
