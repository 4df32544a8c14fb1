// Package hop is the wire of the hop between the gateway and its workers,
// shared by the worker (internal/worker), the cluster backend that calls
// it (internal/cluster) and the "oip" runtime (internal/runtime/oip), which
// speaks the same raw tensors to a server Sluice does not run:
//
//   - the tensor layout (tensors.go): preprocessed rows as raw
//     little-endian FP32 [n, d], token rows as INT64 [n, L] plus their
//     INT64 [n] lengths, outputs as FP32 [n, k], and the inference
//     parameters that carry priority and timings;
//   - errors across a gRPC status (status.go): an *errs.Error keeps its
//     code, field and retry delay from one Sluice process to the next;
//   - the hop's authentication (auth.go): the metadata each side presents
//     (the worker's call secret, the gateway's session secret) and their
//     constant-time checks.
//
// It imports no store, tenant, routing or gateway package, so a worker
// binary links none of them (internal/archtest checks it). The
// gateway-facing Open Inference Protocol (REST and gRPC in front of the
// gateway) is internal/oip; the generated protocol code both use is
// internal/oip/inferencepb.
package hop

import (
	"encoding/binary"
	"math"
)

// Datatypes of the hop's tensors (Open Inference Protocol names).
const (
	FP32  = "FP32"
	INT64 = "INT64"
)

// FP32Raw is vs as raw little-endian FP32 contents.
func FP32Raw(vs []float32) []byte {
	raw := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
	}
	return raw
}

// ReadFP32 fills dst from raw little-endian FP32 contents; the caller has
// checked that len(raw) is 4*len(dst).
func ReadFP32(dst []float32, raw []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
}

// TokensRaw is token rows as raw little-endian INT64 [len(rows), width]
// contents, each row right-padded with pad; the caller has checked that no
// row is longer than width.
func TokensRaw(rows [][]int64, width int, pad int64) []byte {
	raw := make([]byte, 8*len(rows)*width)
	for i, r := range rows {
		row := raw[8*i*width : 8*(i+1)*width]
		for j := range width {
			v := pad
			if j < len(r) {
				v = r[j]
			}
			binary.LittleEndian.PutUint64(row[8*j:], uint64(v))
		}
	}
	return raw
}
