package records

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"time"
)

// A batch is how the SQLite store keeps records: the records of one Write
// (up to the writer's batch size) encoded in one blob, one table row per
// batch. A row per record costs SQLite's B-tree insert and the driver's
// binding per record (2.7 µs each, 5 % of a core at 20k req/s); a row per
// batch pays them once per batch, and the records cost little more than
// their bytes (docs/benchmarks.md, "Prediction records on the hot path").
//
// The encoding, after a version byte and the count: per record its row,
// request id, tenant, model, version, latency (float64 bits), outcome,
// input hash (32 bytes when it is 64 lowercase hex digits, as InputHash
// makes it, else the string), created (unix µs), attempts and input
// (length + 1; 0 for none). Strings are a uvarint length and the bytes.
const batchVersion = 1

// errDamaged is the decoder's error for a blob it cannot read.
var errDamaged = errors.New("records: a batch of records in records.db is damaged (cannot be decoded)")

// batchEncoder builds a batch's blob.
type batchEncoder struct {
	buf        []byte // the records (the header is written by bytes)
	n          int
	minRow     int64
	maxRow     int64
	minCreated int64
	maxCreated int64
	head       [binary.MaxVarintLen64 + 1]byte
}

func (e *batchEncoder) reset() {
	e.buf, e.n = e.buf[:0], 0
}

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// hexVal is the value of each lowercase hex digit, 0xff for other bytes.
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
	}
	return t
}()

// appendHash appends the 32 bytes of s if it is 64 lowercase hex digits
// (InputHash's form) and says whether it was.
func appendHash(b []byte, s string) ([]byte, bool) {
	if len(s) != 64 {
		return b, false
	}
	n := len(b)
	for i := 0; i < 64; i += 2 {
		hi, lo := hexVal[s[i]], hexVal[s[i+1]]
		if hi|lo > 0x0f {
			return b[:n], false
		}
		b = append(b, hi<<4|lo)
	}
	return b, true
}

// add appends r at row; created is r's time (unix µs), attempts ≥ 1.
func (e *batchEncoder) add(row int64, r *Record, created int64, attempts int) {
	b := binary.AppendUvarint(e.buf, uint64(row))
	b = appendStr(b, r.RequestID)
	b = appendStr(b, r.Tenant)
	b = appendStr(b, r.Model)
	b = binary.AppendVarint(b, int64(r.Version))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.LatencyMs))
	b = appendStr(b, r.Outcome)
	b = append(b, 1)
	var raw bool
	if b, raw = appendHash(b, r.InputHash); !raw {
		b[len(b)-1] = 0
		b = appendStr(b, r.InputHash)
	}
	b = binary.AppendVarint(b, created)
	b = binary.AppendVarint(b, int64(attempts))
	if r.Input == nil {
		b = append(b, 0)
	} else {
		b = append(binary.AppendUvarint(b, uint64(len(r.Input))+1), r.Input...)
	}
	e.buf = b
	if e.n == 0 || row < e.minRow {
		e.minRow = row
	}
	if e.n == 0 || row > e.maxRow {
		e.maxRow = row
	}
	if e.n == 0 || created < e.minCreated {
		e.minCreated = created
	}
	if e.n == 0 || created > e.maxCreated {
		e.maxCreated = created
	}
	e.n++
}

// addRecord re-encodes a decoded record.
func (e *batchEncoder) addRecord(r *Record) {
	e.add(r.Row, r, r.CreatedAt.UnixMicro(), r.Attempts)
}

// blob is the batch's encoding: the header and the records. It reuses
// out's array.
func (e *batchEncoder) blob(out []byte) []byte {
	out = append(out[:0], batchVersion)
	out = binary.AppendUvarint(out, uint64(e.n))
	return append(out, e.buf...)
}

// recordView is a decoded record whose strings still point into the blob:
// a listing filters views and makes Records of the matches only.
type recordView struct {
	row       int64
	requestID []byte
	tenant    []byte
	model     []byte
	version   int64
	latency   float64
	outcome   []byte
	hash      []byte
	rawHash   bool // hash is the 32 bytes of a hex hash
	created   int64
	attempts  int64
	input     []byte
	hasInput  bool
}

func (v *recordView) record() Record {
	r := Record{Row: v.row, RequestID: string(v.requestID), Tenant: string(v.tenant), Model: string(v.model),
		Version: int(v.version), LatencyMs: v.latency, Outcome: string(v.outcome),
		CreatedAt: time.UnixMicro(v.created).UTC(), Attempts: int(v.attempts)}
	if v.rawHash {
		r.InputHash = hex.EncodeToString(v.hash)
	} else {
		r.InputHash = string(v.hash)
	}
	if v.hasInput {
		r.Input = append([]byte{}, v.input...)
	}
	return r
}

// batchReader decodes a blob record by record. It never panics: a short
// or malformed blob is errDamaged.
type batchReader struct {
	b    []byte
	left uint64 // records not read yet
	err  error
}

func newBatchReader(blob []byte) *batchReader {
	r := &batchReader{b: blob}
	if len(blob) == 0 || blob[0] != batchVersion {
		r.err = errDamaged
		return r
	}
	r.b = blob[1:]
	r.left = r.uvarint()
	return r
}

func (r *batchReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errDamaged
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *batchReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errDamaged
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *batchReader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errDamaged
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *batchReader) str() []byte { return r.bytes(r.uvarint()) }

// next decodes the next record into v; false at the end or on damage
// (then r.err is set).
func (r *batchReader) next(v *recordView) bool {
	if r.err != nil {
		return false
	}
	if r.left == 0 {
		if len(r.b) != 0 {
			r.err = errDamaged
		}
		return false
	}
	r.left--
	v.row = int64(r.uvarint())
	v.requestID = r.str()
	v.tenant = r.str()
	v.model = r.str()
	v.version = r.varint()
	if f := r.bytes(8); f != nil {
		v.latency = math.Float64frombits(binary.LittleEndian.Uint64(f))
	}
	v.outcome = r.str()
	switch k := r.bytes(1); {
	case k == nil:
	case k[0] == 1:
		v.hash, v.rawHash = r.bytes(32), true
	case k[0] == 0:
		v.hash, v.rawHash = r.str(), false
	default:
		r.err = errDamaged
	}
	v.created = r.varint()
	v.attempts = r.varint()
	switch n := r.uvarint(); n {
	case 0:
		v.input, v.hasInput = nil, false
	default:
		v.input, v.hasInput = r.bytes(n-1), true
	}
	return r.err == nil
}
