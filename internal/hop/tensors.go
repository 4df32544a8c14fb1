package hop

// This file is the tensor layout of the hop between the gateway and its
// workers: preprocessed rows as raw FP32 [n,d], token rows as INT64 [n,L]
// plus their lengths, outputs as FP32 [n,k].

import (
	"encoding/binary"
	"fmt"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/runtime"
)

// Tensor names and datatypes of the gateway → worker hop.
const (
	RowsTensor    = "rows"    // FP32 [n, d]: preprocessed float rows
	TokensTensor  = "tokens"  // INT64 [n, L]: token rows padded to the longest
	LengthsTensor = "lengths" // INT64 [n]: each token row's true length
	OutputTensor  = "outputs" // FP32 [n, k]
)

// Inference parameters of the hop (ModelInferRequest/Response.parameters).
const (
	ParamPriority  = "sluice_priority" // serving.Priority's String: "low" (shadows, background checks), "batch" (batch jobs); absent: online
	ParamQueueNs   = "sluice_queue_ns"
	ParamBatchNs   = "sluice_batch_wait_ns"
	ParamComputeNs = "sluice_compute_ns"
)

// MaxRows bounds the rows of one hop request (a worker refuses more).
const MaxRows = 1 << 20

// EncodeBatch writes b as the inputs of a ModelInferRequest (raw contents).
func EncodeBatch(req *inferencepb.ModelInferRequest, b runtime.Batch) {
	if b.Tokens == nil {
		raw := FP32Raw(b.Data)
		req.Inputs = append(req.Inputs, &inferencepb.ModelInferRequest_InferInputTensor{Name: RowsTensor, Datatype: FP32, Shape: []int64{int64(b.Rows), int64(b.Cols)}})
		req.RawInputContents = append(req.RawInputContents, raw)
		return
	}
	longest := 0
	for _, r := range b.Tokens {
		longest = max(longest, len(r))
	}
	toks := TokensRaw(b.Tokens, longest, 0)
	lens := make([]byte, 8*b.Rows)
	for i, r := range b.Tokens {
		binary.LittleEndian.PutUint64(lens[8*i:], uint64(len(r)))
	}
	req.Inputs = append(req.Inputs,
		&inferencepb.ModelInferRequest_InferInputTensor{Name: TokensTensor, Datatype: INT64, Shape: []int64{int64(b.Rows), int64(longest)}},
		&inferencepb.ModelInferRequest_InferInputTensor{Name: LengthsTensor, Datatype: INT64, Shape: []int64{int64(b.Rows)}})
	req.RawInputContents = append(req.RawInputContents, toks, lens)
}

func bad(format string, args ...any) error {
	return errs.New(errs.InvalidArgument, format, args...)
}

// DecodeBatch reads the inputs EncodeBatch wrote, checking every shape,
// datatype and byte count. cols is the row width the version expects (0:
// a sequence model, which takes tokens). Errors name the tensor.
func DecodeBatch(req *inferencepb.ModelInferRequest, cols int, sequence bool) (runtime.Batch, error) {
	if len(req.RawInputContents) != len(req.Inputs) {
		return runtime.Batch{}, bad("%d input tensors but %d raw contents: the hop sends every tensor as raw contents", len(req.Inputs), len(req.RawInputContents))
	}
	if !sequence {
		if len(req.Inputs) != 1 || req.Inputs[0].Name != RowsTensor {
			return runtime.Batch{}, bad("expected one input tensor %q", RowsTensor)
		}
		t, raw := req.Inputs[0], req.RawInputContents[0]
		if t.Datatype != FP32 || len(t.Shape) != 2 || t.Shape[1] != int64(cols) || t.Shape[0] < 1 || t.Shape[0] > MaxRows {
			return runtime.Batch{}, bad("tensor %q: expected FP32 [n, %d] with 1 <= n <= %d, got %s %v", RowsTensor, cols, MaxRows, t.Datatype, t.Shape)
		}
		n := int(t.Shape[0])
		if len(raw) != 4*n*cols {
			return runtime.Batch{}, bad("tensor %q: shape %v needs %d bytes of raw contents, got %d", RowsTensor, t.Shape, 4*n*cols, len(raw))
		}
		data := make([]float32, n*cols)
		ReadFP32(data, raw)
		return runtime.Batch{Rows: n, Cols: cols, Data: data}, nil
	}
	if len(req.Inputs) != 2 || req.Inputs[0].Name != TokensTensor || req.Inputs[1].Name != LengthsTensor {
		return runtime.Batch{}, bad("expected input tensors %q and %q", TokensTensor, LengthsTensor)
	}
	tt, lt := req.Inputs[0], req.Inputs[1]
	if tt.Datatype != INT64 || len(tt.Shape) != 2 || tt.Shape[0] < 1 || tt.Shape[0] > MaxRows || tt.Shape[1] < 0 || tt.Shape[1] > MaxRows {
		return runtime.Batch{}, bad("tensor %q: expected INT64 [n, L], got %s %v", TokensTensor, tt.Datatype, tt.Shape)
	}
	n, l := int(tt.Shape[0]), int(tt.Shape[1])
	if lt.Datatype != INT64 || len(lt.Shape) != 1 || lt.Shape[0] != int64(n) {
		return runtime.Batch{}, bad("tensor %q: expected INT64 [%d], got %s %v", LengthsTensor, n, lt.Datatype, lt.Shape)
	}
	raw, lraw := req.RawInputContents[0], req.RawInputContents[1]
	if len(raw) != 8*n*l || len(lraw) != 8*n {
		return runtime.Batch{}, bad("tensors %q/%q: raw contents of %d/%d bytes do not match shapes %v/%v", TokensTensor, LengthsTensor, len(raw), len(lraw), tt.Shape, lt.Shape)
	}
	b := runtime.Batch{Rows: n, Tokens: make([][]int64, n)}
	for i := 0; i < n; i++ {
		k := binary.LittleEndian.Uint64(lraw[8*i:])
		if k > uint64(l) {
			return runtime.Batch{}, bad("tensor %q: row %d has length %d, longer than %d", LengthsTensor, i, k, l)
		}
		row := make([]int64, k)
		for j := range row {
			row[j] = int64(binary.LittleEndian.Uint64(raw[8*(i*l+j):]))
		}
		b.Tokens[i] = row
	}
	return b, nil
}

// EncodeOutput writes out as the response's one FP32 [n, k] output.
func EncodeOutput(resp *inferencepb.ModelInferResponse, out runtime.Output) {
	raw := FP32Raw(out.Data)
	resp.Outputs = append(resp.Outputs, &inferencepb.ModelInferResponse_InferOutputTensor{Name: OutputTensor, Datatype: FP32, Shape: []int64{int64(out.Rows), int64(out.Cols)}})
	resp.RawOutputContents = append(resp.RawOutputContents, raw)
}

// DecodeOutput reads the output EncodeOutput wrote, expecting rows rows.
func DecodeOutput(resp *inferencepb.ModelInferResponse, rows int) (runtime.Output, error) {
	if len(resp.Outputs) != 1 || len(resp.RawOutputContents) != 1 {
		return runtime.Output{}, fmt.Errorf("worker answered %d output tensors and %d raw contents, expected 1", len(resp.Outputs), len(resp.RawOutputContents))
	}
	t, raw := resp.Outputs[0], resp.RawOutputContents[0]
	if t.Datatype != FP32 || len(t.Shape) != 2 || t.Shape[0] != int64(rows) || t.Shape[1] < 1 || t.Shape[1] > 1<<16 {
		return runtime.Output{}, fmt.Errorf("worker answered output %s %v, expected FP32 [%d, k]", t.Datatype, t.Shape, rows)
	}
	k := int(t.Shape[1])
	if len(raw) != 4*rows*k {
		return runtime.Output{}, fmt.Errorf("worker answered %d bytes for output %v", len(raw), t.Shape)
	}
	data := make([]float32, rows*k)
	ReadFP32(data, raw)
	return runtime.Output{Rows: rows, Cols: k, Data: data}, nil
}
