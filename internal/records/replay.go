package records

import "time"

// Saved is what a record keeps so that a retry of its request id is
// answered from the store after the in-memory cache forgot it (a restart,
// or ids evicted from a full cache): written with the record, in the same
// transaction, for request ids the client chose and answers that are
// Cacheable. The records package does not read Answer: the gateway
// encodes and decodes it.
type Saved struct {
	Key    string    // what the cache compares: a retry with another key is a conflict
	Status int       // the answer's status (Cacheable)
	Answer []byte    // the encoded answer; nil when it was over MaxReplayBytes
	Until  time.Time // the end of the idempotency window
}

// MaxReplayBytes bounds the encoded answer a Saved keeps; a larger answer
// is kept as a Saved without Answer (its retry is refused, not computed
// again).
const MaxReplayBytes = 64 << 10

// Found is a stored Saved and the row of its record (for the attempts bump).
type Found struct {
	Row int64
	Saved
}
