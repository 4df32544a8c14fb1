package records

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

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

// replaysSQL is the table of replays: only records with a Saved answer have a
// row, so the random-key primary key costs only requests with a client-
// chosen id, never the others (the records keep no such index).
const replaysSQL = `
CREATE TABLE IF NOT EXISTS replays (
  tenant     TEXT    NOT NULL,
  request_id TEXT    NOT NULL,
  row        INTEGER NOT NULL, -- records.id of the record
  key        TEXT    NOT NULL,
  status     INTEGER NOT NULL,
  answer     BLOB,             -- NULL: the answer was over MaxReplayBytes
  until      INTEGER NOT NULL, -- unix microseconds
  PRIMARY KEY (tenant, request_id)
) WITHOUT ROWID;
`

// writeReplayLocked stores rec's Saved for the record at row, replacing
// an older one of the same id (a retry computed again after a
// non-replayable answer).
func (s *SQLite) writeReplayLocked(ctx context.Context, dc any, row int64, rec Record) error {
	r := rec.Saved
	var answer any
	if r.Answer != nil {
		answer = r.Answer
	}
	if _, err := s.execLocked(ctx, dc, insertReplaySQL, rec.Tenant, rec.RequestID, row, r.Key, r.Status, answer, r.Until.UnixMicro()); err != nil {
		return fmt.Errorf("records: keep the answer of %s: %w", rec.RequestID, err)
	}
	return nil
}

const insertReplaySQL = `INSERT OR REPLACE INTO replays (tenant, request_id, row, key, status, answer, until) VALUES (?, ?, ?, ?, ?, ?, ?)`

// Lookup returns tenant's saved answer of requestID whose window has not
// ended at now, or nil. It reads through a connection of its own, so it
// does not wait for the writer's transactions.
func (s *SQLite) Lookup(ctx context.Context, tenant, requestID string, now time.Time) (*Found, error) {
	var k Found
	var until int64
	err := s.rdb.QueryRowContext(ctx, `SELECT row, key, status, answer, until FROM replays WHERE tenant = ? AND request_id = ? AND until > ?`,
		tenant, requestID, now.UnixMicro()).Scan(&k.Row, &k.Key, &k.Status, &k.Answer, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("records: look up request id %s: %w", requestID, err)
	}
	k.Until = time.UnixMicro(until).UTC()
	return &k, nil
}

// ExpireReplays deletes replays whose window ended before now.
func (s *SQLite) ExpireReplays(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM replays WHERE until < ?`, now.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("records: delete replays that ended before %s: %w", now.Format(time.RFC3339), err)
	}
	return res.RowsAffected()
}
