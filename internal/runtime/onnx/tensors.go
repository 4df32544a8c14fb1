//go:build cgo

package onnx

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"
)

// maxShapes bounds the input/output tensor pairs one replica keeps: one per
// batch shape seen ([n, d] for a tabular model, [n, L] for a sequence
// model), the least recently used evicted beyond it. A pair is two ONNX
// Runtime value headers over the replica's shared buffers (a few hundred
// bytes), so 64 keeps every batch size of a maxBatchSize up to 64 warm.
const maxShapes = 64

// shape is a batch's input shape: rows × width.
type shape struct{ rows, width int }

// boundPair is one cached shape: the input and output tensors over prefixes
// of the cache's buffers, and the value slices handed to Run (made once so
// a run allocates no argument slices).
type boundPair struct {
	inputs, outputs []ort.Value
	used            uint64 // the cache's tick at the last use
}

func (p *boundPair) destroy() {
	for _, v := range append(p.inputs, p.outputs...) {
		v.Destroy()
	}
}

// tensorCache keeps a replica's input and output tensors per batch shape so
// a Predict only copies its rows in, runs, and copies the output out. All
// pairs view one input and one output buffer, grown (and every pair
// dropped) when a batch does not fit. It belongs to one Model and is used
// under the Model's mutex.
type tensorCache[T ort.TensorData] struct {
	outShape func(n int) ort.Shape
	outCols  int
	in       []T       // input buffer: every pair's input tensor views a prefix
	out      []float32 // output buffer, likewise
	pairs    map[shape]*boundPair
	tick     uint64
}

func newTensorCache[T ort.TensorData](outCols int, outShape func(n int) ort.Shape) *tensorCache[T] {
	return &tensorCache[T]{outShape: outShape, outCols: outCols, pairs: map[shape]*boundPair{}}
}

// get returns the pair for a rows×width batch and the buffer prefixes its
// tensors read and write, making the pair (and growing the buffers) if
// needed.
func (c *tensorCache[T]) get(rows, width int) (*boundPair, []T, []float32, error) {
	c.tick++
	nIn, nOut := rows*width, rows*c.outCols
	k := shape{rows, width}
	if p, ok := c.pairs[k]; ok {
		p.used = c.tick
		return p, c.in[:nIn], c.out[:nOut], nil
	}
	if nIn > len(c.in) || nOut > len(c.out) {
		// Tensors hold pointers into the old buffers: drop them all. The
		// buffers at least double, so this happens a few times per replica.
		c.flush()
		c.in = make([]T, max(nIn, 2*len(c.in)))
		c.out = make([]float32, max(nOut, 2*len(c.out)))
	}
	if len(c.pairs) >= maxShapes {
		c.evictOldest()
	}
	inT, err := ort.NewTensor(ort.NewShape(int64(rows), int64(width)), c.in[:nIn])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("onnx: input tensor: %v", err)
	}
	outT, err := ort.NewTensor(c.outShape(rows), c.out[:nOut])
	if err != nil {
		inT.Destroy()
		return nil, nil, nil, fmt.Errorf("onnx: output tensor: %v", err)
	}
	p := &boundPair{inputs: []ort.Value{inT}, outputs: []ort.Value{outT}, used: c.tick}
	c.pairs[k] = p
	return p, c.in[:nIn], c.out[:nOut], nil
}

// evictOldest destroys the least recently used pair.
func (c *tensorCache[T]) evictOldest() {
	var oldest shape
	first := true
	for k, p := range c.pairs {
		if first || p.used < c.pairs[oldest].used {
			oldest, first = k, false
		}
	}
	if !first {
		c.pairs[oldest].destroy()
		delete(c.pairs, oldest)
	}
}

// flush destroys every pair.
func (c *tensorCache[T]) flush() {
	for k, p := range c.pairs {
		p.destroy()
		delete(c.pairs, k)
	}
}

// shapes reports how many pairs are cached (for tests).
func (c *tensorCache[T]) shapes() int { return len(c.pairs) }
