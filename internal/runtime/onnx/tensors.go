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
// pairs view one buffer per input (a sequence model may have several
// inputs of one shape: input_ids and attention_mask) and one output
// buffer, grown (and every pair dropped) when a batch does not fit. It
// belongs to one Model and is used under the Model's mutex.
type tensorCache[T ort.TensorData] struct {
	outShape func(n int) ort.Shape
	outCols  int
	in       [][]T     // input buffers: every pair's input tensor j views a prefix of in[j]
	out      []float32 // output buffer, likewise
	views    [][]T     // the prefixes get returns (reused)
	pairs    map[shape]*boundPair
	tick     uint64
}

func newTensorCache[T ort.TensorData](inputs, outCols int, outShape func(n int) ort.Shape) *tensorCache[T] {
	return &tensorCache[T]{outShape: outShape, outCols: outCols, in: make([][]T, inputs), views: make([][]T, inputs), pairs: map[shape]*boundPair{}}
}

// get returns the pair for a rows×width batch and the buffer prefixes its
// tensors read and write (one per input; the slice is reused by the next
// get), making the pair (and growing the buffers) if needed.
func (c *tensorCache[T]) get(rows, width int) (*boundPair, [][]T, []float32, error) {
	c.tick++
	nIn, nOut := rows*width, rows*c.outCols
	k := shape{rows, width}
	p, ok := c.pairs[k]
	if !ok {
		var err error
		if p, err = c.make(rows, width); err != nil {
			return nil, nil, nil, err
		}
		c.pairs[k] = p
	}
	p.used = c.tick
	for j := range c.in {
		c.views[j] = c.in[j][:nIn]
	}
	return p, c.views, c.out[:nOut], nil
}

// make creates the pair of a shape not cached.
func (c *tensorCache[T]) make(rows, width int) (*boundPair, error) {
	nIn, nOut := rows*width, rows*c.outCols
	if nIn > len(c.in[0]) || nOut > len(c.out) {
		// Tensors hold pointers into the old buffers: drop them all. The
		// buffers at least double, so this happens a few times per replica.
		c.flush()
		size := max(nIn, 2*len(c.in[0]))
		for j := range c.in {
			c.in[j] = make([]T, size)
		}
		c.out = make([]float32, max(nOut, 2*len(c.out)))
	}
	if len(c.pairs) >= maxShapes {
		c.evictOldest()
	}
	p := &boundPair{}
	for j := range c.in {
		inT, err := ort.NewTensor(ort.NewShape(int64(rows), int64(width)), c.in[j][:nIn])
		if err != nil {
			p.destroy()
			return nil, fmt.Errorf("onnx: input tensor: %v", err)
		}
		p.inputs = append(p.inputs, inT)
	}
	outT, err := ort.NewTensor(c.outShape(rows), c.out[:nOut])
	if err != nil {
		p.destroy()
		return nil, fmt.Errorf("onnx: output tensor: %v", err)
	}
	p.outputs = []ort.Value{outT}
	return p, nil
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
