package recordsdb

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"github.com/sluiceml/sluice/internal/records"
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
// The encoding, after a version byte and the count, per record: its row
// (the difference from the previous record's, the first from 0), request
// id, tenant, model, version, latency (float64 bits), outcome, input hash,
// created (unix µs, the difference from the previous record's), attempts
// and input (length + 1; 0 for none), then (version 2) the instances
// answered from the prediction cache, then (version 3) the enrichment's
// JSON (length + 1; 0 for none). The request id and the input hash
// are a kind byte and, for lowercase hex of even length (the ids the
// server makes, the hashes InputHash makes), half as many bytes, else the
// string. Tenant, model and outcome are an index into the batch's
// strings: the next index brings a new one, written after it. Strings are
// a uvarint length and the bytes. Bytes are what a batch costs: SQLite
// writes each twice (WAL, checkpoint).
const batchVersion = 4

// batchV3 is the encoding before Record.Outputs (read, never written).
const batchV3 = 3

// batchV1 is the encoding before Record.Cached (read, never written).
const batchV1 = 1

// batchV2 is the encoding before Record.Features (read, never written).
const batchV2 = 2

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
	prevRow    int64
	prevAt     int64
	dict       []string // tenant, model and outcome strings, by index
}

func (e *batchEncoder) reset() {
	e.buf, e.n = e.buf[:0], 0
	e.prevRow, e.prevAt = 0, 0
	e.dict = e.dict[:0]
}

// appendWord appends the dictionary index of w, and w itself when it is
// new. Batches hold few distinct tenants, models and outcomes: a linear
// search of the last ones is enough (past 64 they are written again).
func (e *batchEncoder) appendWord(b []byte, w string) []byte {
	for i := len(e.dict) - 1; i >= 0 && i >= len(e.dict)-64; i-- {
		if e.dict[i] == w {
			return binary.AppendUvarint(b, uint64(i))
		}
	}
	b = binary.AppendUvarint(b, uint64(len(e.dict)))
	e.dict = append(e.dict, w)
	return appendStr(b, w)
}

// appendHexOrStr appends s packed if it is lowercase hex of even length,
// else as a string, after its kind byte.
func appendHexOrStr(b []byte, s string) []byte {
	if len(s)%2 == 0 && len(s) > 0 && len(s) <= 2*maxPacked {
		n := len(b)
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(s)/2))
		if b, ok := appendHex(b, s); ok {
			return b
		}
		b = b[:n]
	}
	return appendStr(append(b, 0), s)
}

// maxPacked bounds the hex strings packed.
const maxPacked = 64

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

// appendHex appends the bytes of s, lowercase hex of even length, and
// says whether it was (if not, what it appended is garbage to drop).
func appendHex(b []byte, s string) ([]byte, bool) {
	for i := 0; i+1 < len(s); i += 2 {
		hi, lo := hexVal[s[i]], hexVal[s[i+1]]
		if hi|lo > 0x0f {
			return b, false
		}
		b = append(b, hi<<4|lo)
	}
	return b, true
}

// packedIs reports whether the packed bytes p are the hex string s.
func packedIs(p []byte, s string) bool {
	if len(s) != 2*len(p) {
		return false
	}
	for i, c := range p {
		hi, lo := hexVal[s[2*i]], hexVal[s[2*i+1]]
		if hi|lo > 0x0f || hi<<4|lo != c {
			return false
		}
	}
	return true
}

// add appends r at row; created is r's time (unix µs), attempts ≥ 1.
func (e *batchEncoder) add(row int64, r *records.Record, created int64, attempts int) {
	b := binary.AppendVarint(e.buf, row-e.prevRow)
	b = appendHexOrStr(b, r.RequestID)
	b = e.appendWord(b, r.Tenant)
	b = e.appendWord(b, r.Model)
	b = binary.AppendVarint(b, int64(r.Version))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.LatencyMs))
	b = e.appendWord(b, r.Outcome)
	b = appendHexOrStr(b, r.InputHash)
	b = binary.AppendVarint(b, created-e.prevAt)
	b = binary.AppendVarint(b, int64(attempts))
	if r.Input == nil {
		b = append(b, 0)
	} else {
		b = append(binary.AppendUvarint(b, uint64(len(r.Input))+1), r.Input...)
	}
	b = binary.AppendUvarint(b, uint64(max(r.Cached, 0)))
	if r.Features == nil {
		b = append(b, 0)
	} else {
		b = append(binary.AppendUvarint(b, uint64(len(r.Features))+1), r.Features...)
	}
	if r.Outputs == nil {
		b = append(b, 0)
	} else {
		b = append(binary.AppendUvarint(b, uint64(len(r.Outputs))+1), r.Outputs...)
	}
	e.prevRow, e.prevAt = row, created
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
func (e *batchEncoder) addRecord(r *records.Record) {
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
	idHex     bool // requestID is the bytes of a hex id
	tenant    []byte
	model     []byte
	version   int64
	latency   float64
	outcome   []byte
	hash      []byte
	rawHash   bool // hash is the bytes of a hex hash
	created   int64
	attempts  int64
	input     []byte
	hasInput  bool
	cached    uint64
	features  []byte
	hasFeat   bool
	outputs   []byte
	hasOut    bool
}

// id is the request id.
func (v *recordView) id() string {
	if v.idHex {
		return hex.EncodeToString(v.requestID)
	}
	return string(v.requestID)
}

// idIs reports whether the request id is s.
func (v *recordView) idIs(s string) bool {
	if v.idHex {
		return packedIs(v.requestID, s)
	}
	return string(v.requestID) == s
}

func (v *recordView) record() records.Record {
	r := records.Record{Row: v.row, RequestID: v.id(), Tenant: string(v.tenant), Model: string(v.model),
		Version: int(v.version), LatencyMs: v.latency, Outcome: string(v.outcome),
		CreatedAt: time.UnixMicro(v.created).UTC(), Attempts: int(v.attempts), Cached: int(min(v.cached, 1<<31))}
	if v.rawHash {
		r.InputHash = hex.EncodeToString(v.hash)
	} else {
		r.InputHash = string(v.hash)
	}
	if v.hasFeat {
		r.Features = append([]byte{}, v.features...)
	}
	if v.hasInput {
		r.Input = append([]byte{}, v.input...)
	}
	if v.hasOut {
		r.Outputs = append([]byte{}, v.outputs...)
	}
	return r
}

// batchReader decodes a blob record by record. It never panics: a short
// or malformed blob is errDamaged.
type batchReader struct {
	b       []byte
	left    uint64 // records not read yet
	err     error
	dict    [][]byte // the batch's words so far
	prevRow int64
	prevAt  int64
	version byte // the blob's encoding (batchV1, batchV2 or batchVersion)
}

// word reads a dictionary index (and the new word it brings).
func (r *batchReader) word() []byte {
	i := r.uvarint()
	switch {
	case r.err != nil:
		return nil
	case i < uint64(len(r.dict)):
		return r.dict[i]
	case i == uint64(len(r.dict)):
		w := r.str()
		r.dict = append(r.dict, w)
		return w
	}
	r.err = errDamaged
	return nil
}

// hexOrStr reads a kind byte and a packed hex string or a string.
func (r *batchReader) hexOrStr() (b []byte, packed bool) {
	switch k := r.bytes(1); {
	case k == nil:
		return nil, false
	case k[0] == 1:
		return r.bytes(r.uvarint()), true
	case k[0] == 0:
		return r.str(), false
	}
	r.err = errDamaged
	return nil, false
}

func newBatchReader(blob []byte) *batchReader {
	r := &batchReader{b: blob}
	if len(blob) == 0 || blob[0] != batchVersion && blob[0] != batchV1 && blob[0] != batchV2 && blob[0] != batchV3 {
		r.err = errDamaged
		return r
	}
	r.version = blob[0]
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
	r.prevRow += r.varint()
	v.row = r.prevRow
	v.requestID, v.idHex = r.hexOrStr()
	v.tenant = r.word()
	v.model = r.word()
	v.version = r.varint()
	if f := r.bytes(8); f != nil {
		v.latency = math.Float64frombits(binary.LittleEndian.Uint64(f))
	}
	v.outcome = r.word()
	v.hash, v.rawHash = r.hexOrStr()
	r.prevAt += r.varint()
	v.created = r.prevAt
	v.attempts = r.varint()
	switch n := r.uvarint(); n {
	case 0:
		v.input, v.hasInput = nil, false
	default:
		v.input, v.hasInput = r.bytes(n-1), true
	}
	v.cached = 0
	if r.version >= 2 {
		v.cached = r.uvarint()
	}
	v.features, v.hasFeat = nil, false
	if r.version >= 3 {
		if n := r.uvarint(); n > 0 {
			v.features, v.hasFeat = r.bytes(n-1), true
		}
	}
	v.outputs, v.hasOut = nil, false
	if r.version >= 4 {
		if n := r.uvarint(); n > 0 {
			v.outputs, v.hasOut = r.bytes(n-1), true
		}
	}
	return r.err == nil
}
