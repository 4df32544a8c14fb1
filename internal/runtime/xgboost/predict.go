package xgboost

import (
	"math"
	"unsafe"
)

// rowBlock is how many rows are pushed through one tree before moving to the
// next tree, as XGBoost's CPU predictor does: the block's rows stay in cache
// while the trees stream past them.
const rowBlock = 64

// lanes is how many walks proceed together: several rows through one tree,
// or one row through several trees. The walks are independent, so the CPU
// overlaps them instead of waiting on one chain of node loads.
const lanes = 8

// margins writes the margins of the rows in data (cols values each) into out
// (numGroup values per row). For every row and group it starts from the base
// margin and adds the leaf value of each tree of that group in tree order, in
// float32: exactly XGBoost's accumulation, so the result is bit-identical.
func (m *Model) margins(data []float32, cols int, out []float32) {
	ng := m.numGroup
	rows := len(out) / ng
	for r := range rows {
		copy(out[r*ng:(r+1)*ng], m.baseMargin)
	}
	// Rows are copied into a scratch block with one extra slot holding
	// -Inf, the feature every leaf reads (see node).
	stride := cols + 1
	scratch := make([]float32, min(rows, rowBlock)*stride)
	ninf := float32(math.Inf(-1))
	for start := 0; start < rows; start += rowBlock {
		n := min(rowBlock, rows-start)
		for r := range n {
			s := scratch[r*stride : (r+1)*stride]
			copy(s, data[(start+r)*cols:(start+r+1)*cols])
			s[cols] = ninf
		}
		if m.catOf != nil {
			m.blockCat(scratch[:n*stride], stride, n, out[start*ng:(start+n)*ng])
		} else {
			m.block(scratch[:n*stride], stride, n, out[start*ng:(start+n)*ng])
		}
	}
}

// blockCat is block for a model with categorical splits: the same order
// (trees outer, rows inner, lanes rows of a block walking a tree together),
// with stepCat's bounds-checked, branchy step. Models without categorical
// splits never come here, so the numerical walk keeps its speed.
func (m *Model) blockCat(rows []float32, stride, n int, acc []float32) {
	nodes := m.nodes
	ng := m.numGroup
	full := n - n%lanes
	for t, root := range m.roots {
		g := int(m.groups[t])
		depth := int(m.depths[t])
		for r := 0; r < full; r += lanes {
			i0, i1, i2, i3, i4, i5, i6, i7 := root, root, root, root, root, root, root, root
			r0 := rows[r*stride : (r+1)*stride]
			r1 := rows[(r+1)*stride : (r+2)*stride]
			r2 := rows[(r+2)*stride : (r+3)*stride]
			r3 := rows[(r+3)*stride : (r+4)*stride]
			r4 := rows[(r+4)*stride : (r+5)*stride]
			r5 := rows[(r+5)*stride : (r+6)*stride]
			r6 := rows[(r+6)*stride : (r+7)*stride]
			r7 := rows[(r+7)*stride : (r+8)*stride]
			for range depth {
				i0 = m.stepCat(i0, r0)
				i1 = m.stepCat(i1, r1)
				i2 = m.stepCat(i2, r2)
				i3 = m.stepCat(i3, r3)
				i4 = m.stepCat(i4, r4)
				i5 = m.stepCat(i5, r5)
				i6 = m.stepCat(i6, r6)
				i7 = m.stepCat(i7, r7)
			}
			a := acc[r*ng+g : (r+lanes-1)*ng+g+1]
			a[0] += nodes[i0].value
			a[ng] += nodes[i1].value
			a[2*ng] += nodes[i2].value
			a[3*ng] += nodes[i3].value
			a[4*ng] += nodes[i4].value
			a[5*ng] += nodes[i5].value
			a[6*ng] += nodes[i6].value
			a[7*ng] += nodes[i7].value
		}
		for r := full; r < n; r++ {
			row := rows[r*stride : (r+1)*stride]
			i := root
			for range depth {
				i = m.stepCat(i, row)
			}
			acc[r*ng+g] += nodes[i].value
		}
	}
}

// stepCat is step for a model with categorical splits, bounds-checked. A
// categorical split (its value is NaN, which no numerical split or leaf
// has) sends a category in its set right and everything else left: a code
// outside [0, 2^24), fractional codes truncated, as XGBoost's
// common::Decision does. A missing value follows the default direction.
func (m *Model) stepCat(i int32, row []float32) int32 {
	nd := &m.nodes[i]
	v := row[nd.feat]
	if v != v {
		return nd.missing
	}
	if nd.value != nd.value {
		sp := m.catSpans[m.catOf[i]]
		if v >= 0 && v < maxCategory {
			k := uint32(v)
			if w := int32(k / 32); w < sp.n && m.catWords[sp.off+w]>>(k%32)&1 != 0 {
				return nd.left + 1
			}
		}
		return nd.left
	}
	return nd.left + 1 - b2i(v < nd.value)
}

// block predicts n rows (stride values each, the last one -Inf) through every
// tree, adding leaf values into acc (numGroup per row). Whole groups of lanes
// rows walk each tree together; the rows left over walk lanes trees at a
// time instead.
func (m *Model) block(rows []float32, stride, n int, acc []float32) {
	nodes := m.nodes
	ng := m.numGroup
	full := n - n%lanes
	if full > 0 {
		np := unsafe.Pointer(unsafe.SliceData(nodes))
		sb := uintptr(stride) * 4
		for t, root := range m.roots {
			depth := int(m.depths[t])
			g := int(m.groups[t])
			for r := 0; r < full; r += lanes {
				// The lanes are written out so that their eight node
				// indices stay in registers.
				i0, i1, i2, i3, i4, i5, i6, i7 := root, root, root, root, root, root, root, root
				_ = rows[(r+lanes)*stride-1] // the eight rows are in rows
				p := unsafe.Pointer(&rows[r*stride])
				for range depth {
					i0 = step(np, i0, p)
					i1 = step(np, i1, unsafe.Add(p, sb))
					i2 = step(np, i2, unsafe.Add(p, 2*sb))
					i3 = step(np, i3, unsafe.Add(p, 3*sb))
					i4 = step(np, i4, unsafe.Add(p, 4*sb))
					i5 = step(np, i5, unsafe.Add(p, 5*sb))
					i6 = step(np, i6, unsafe.Add(p, 6*sb))
					i7 = step(np, i7, unsafe.Add(p, 7*sb))
				}
				a := acc[r*ng+g : (r+lanes-1)*ng+g+1]
				a[0] += nodes[i0].value
				a[ng] += nodes[i1].value
				a[2*ng] += nodes[i2].value
				a[3*ng] += nodes[i3].value
				a[4*ng] += nodes[i4].value
				a[5*ng] += nodes[i5].value
				a[6*ng] += nodes[i6].value
				a[7*ng] += nodes[i7].value
			}
		}
	}
	for r := full; r < n; r++ {
		m.rowAcrossTrees(rows[r*stride:(r+1)*stride], acc[r*ng:(r+1)*ng])
	}
}

// rowAcrossTrees walks one row (its last value -Inf) through lanes trees
// at a time and adds the leaf values into acc in tree order.
func (m *Model) rowAcrossTrees(row []float32, acc []float32) {
	nodes := m.nodes
	roots, depths, groups := m.roots, m.depths, m.groups
	np := unsafe.Pointer(unsafe.SliceData(nodes))
	_ = row[m.numFeature] // every feature index and the sentinel are in row
	p := unsafe.Pointer(unsafe.SliceData(row))
	t := 0
	for ; t+lanes <= len(roots); t += lanes {
		r := roots[t : t+lanes]
		i0, i1, i2, i3, i4, i5, i6, i7 := r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]
		depth := int32(0)
		for _, d := range depths[t : t+lanes] {
			depth = max(depth, d)
		}
		for range depth {
			i0 = step(np, i0, p)
			i1 = step(np, i1, p)
			i2 = step(np, i2, p)
			i3 = step(np, i3, p)
			i4 = step(np, i4, p)
			i5 = step(np, i5, p)
			i6 = step(np, i6, p)
			i7 = step(np, i7, p)
		}
		gs := groups[t : t+lanes]
		acc[gs[0]] += nodes[i0].value
		acc[gs[1]] += nodes[i1].value
		acc[gs[2]] += nodes[i2].value
		acc[gs[3]] += nodes[i3].value
		acc[gs[4]] += nodes[i4].value
		acc[gs[5]] += nodes[i5].value
		acc[gs[6]] += nodes[i6].value
		acc[gs[7]] += nodes[i7].value
	}
	for ; t < len(roots); t++ {
		i := roots[t]
		for range depths[t] {
			i = step(np, i, p)
		}
		acc[groups[t]] += nodes[i].value
	}
}

// step moves a walk from node i one level down for the row at p (its first
// value). A leaf loops to itself (it reads the sentinel -Inf slot), so every
// walk of a tree's depth steps ends on its leaf.
//
// The loads are unchecked: loading guarantees every child index is a node
// of m.nodes and every split feature is below num_feature, leaves read the
// slot num_feature, and the callers check that the row holds num_feature+1
// values. This hot loop is the package's only use of unsafe: with bounds
// checks and the lanes in a loop it ran 1.45x slower
// (BenchmarkPredict500Trees).
func step(np unsafe.Pointer, i int32, p unsafe.Pointer) int32 {
	nd := (*node)(unsafe.Add(np, uintptr(i)*unsafe.Sizeof(node{})))
	v := *(*float32)(unsafe.Add(p, uintptr(nd.feat)*4))
	// Right (left+1) unless v < value: b2i keeps it a SETcc, where an if
	// is a branch mispredicted on about every other split. NaN (rare, so
	// a predictable branch) follows the default direction.
	next := nd.left + 1 - b2i(v < nd.value)
	if v != v {
		next = nd.missing
	}
	return next
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
