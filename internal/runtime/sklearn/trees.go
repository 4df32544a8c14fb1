package sklearn

import (
	"fmt"
	"math"
	"unsafe"
)

// node is one node of the flattened trees. Children are adjacent: a split
// goes to left when its value is <= thr, else to left+1; a missing value
// (NaN) goes to missing. A leaf's left is itself and its feature is the
// sentinel column (nFeatures) every scratch row holds as -Inf, so a walk
// of a tree's depth steps ends on its leaf whatever its length.
type node struct {
	feat    int32
	left    int32
	missing int32
	thr     float32 // the largest float32 <= scikit-learn's float64 threshold
}

// treeSet is the flattened trees of a forest or a boosted model.
type treeSet struct {
	nodes  []node
	vals   []float64 // width values per node, read at leaves
	width  int       // values per leaf: the classes or outputs of a forest, 1 for boosting
	roots  []int32
	depths []int32
	offs   []int32 // where in a row's raw scores each tree's leaf values go
	// HistGradientBoosting's categorical splits: catOf[i] >= 0 is node i's
	// set of categories going left (words cat[catOf[i]*8:]), known[f] the
	// categories feature f saw in training (nil: f is numeric).
	catOf    []int32
	cat      []uint32
	known    [][]uint32
	nanSplit bool // the trees have missing-value directions
}

// buildTrees validates d.Trees and flattens them. width: leaf values per
// node; groups: trees of a stage (tree t adds into raw score t%groups);
// scale multiplies every leaf value (GradientBoosting's learning rate, as
// its predict_stages does: raw += scale * value).
func (m *Model) buildTrees(d *doc, width, groups int, scale float64, hist bool) error {
	if len(d.Trees) > MaxTrees {
		return fmt.Errorf("trees: %d trees, at most %d are allowed", len(d.Trees), MaxTrees)
	}
	total := 0
	for t := range d.Trees {
		total += len(d.Trees[t].Left)
		if total > MaxNodes {
			return fmt.Errorf("trees: more than %d nodes in all, at most %d are allowed", MaxNodes, MaxNodes)
		}
	}
	if total*width > MaxNodes*4 {
		return fmt.Errorf("trees: %d nodes of %d values each, at most %d values are allowed", total, width, MaxNodes*4)
	}
	ts := &treeSet{width: width, nodes: make([]node, 0, total), vals: make([]float64, 0, total*width)}
	withNaN := -1
	if d.KnownCategories != nil {
		if !hist {
			return fmt.Errorf("knownCategories: only a HistGradientBoosting model has categorical splits")
		}
		if len(d.KnownCategories) != d.NFeatures {
			return fmt.Errorf("knownCategories: has %d entries, nFeatures is %d", len(d.KnownCategories), d.NFeatures)
		}
		for f, w := range d.KnownCategories {
			if w != nil && len(w) != bitsetWords {
				return fmt.Errorf("knownCategories[%d]: a bitset has %d words, got %d", f, bitsetWords, len(w))
			}
		}
		ts.known = d.KnownCategories
	}
	for t := range d.Trees {
		td := &d.Trees[t]
		hasNaN := td.MissingLeft != nil
		if withNaN == -1 {
			withNaN = b2int(hasNaN)
		} else if withNaN != b2int(hasNaN) {
			return fmt.Errorf("trees[%d].missingLeft: present in some trees and not in others", t)
		}
		if hist && !hasNaN {
			return fmt.Errorf("trees[%d].missingLeft: a HistGradientBoosting tree needs its missing-value directions", t)
		}
		root, depth, err := ts.add(td, d.NFeatures, width, scale, t)
		if err != nil {
			return err
		}
		ts.roots = append(ts.roots, root)
		ts.depths = append(ts.depths, depth)
		ts.offs = append(ts.offs, int32((t%groups)*width))
	}
	ts.nanSplit = withNaN == 1
	m.trees = ts
	return nil
}

func b2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// add validates tree t and appends it breadth first, so that the children
// of each split are adjacent. It returns the root's index and the depth.
func (ts *treeSet) add(td *treeDoc, nFeatures, width int, scale float64, t int) (int32, int32, error) {
	n := len(td.Left)
	p := func(field string) string { return fmt.Sprintf("trees[%d].%s", t, field) }
	if n == 0 {
		return 0, 0, fmt.Errorf("%s: a tree needs at least one node", p("left"))
	}
	for _, a := range []struct {
		name string
		n    int
	}{{"right", len(td.Right)}, {"feature", len(td.Feature)}, {"threshold", len(td.Threshold)}} {
		if a.n != n {
			return 0, 0, fmt.Errorf("%s: has %d entries, left has %d", p(a.name), a.n, n)
		}
	}
	if len(td.Value) != n*width {
		return 0, 0, fmt.Errorf("%s: has %d values, want %d nodes x %d", p("value"), len(td.Value), n, width)
	}
	if td.MissingLeft != nil && len(td.MissingLeft) != n {
		return 0, 0, fmt.Errorf("%s: has %d entries, left has %d", p("missingLeft"), len(td.MissingLeft), n)
	}
	if td.CatIndex != nil {
		if ts.known == nil {
			return 0, 0, fmt.Errorf("%s: categorical splits need knownCategories", p("catIndex"))
		}
		if len(td.CatIndex) != n {
			return 0, 0, fmt.Errorf("%s: has %d entries, left has %d", p("catIndex"), len(td.CatIndex), n)
		}
	} else if td.Categories != nil {
		return 0, 0, fmt.Errorf("%s: categories without catIndex", p("categories"))
	}
	for k, w := range td.Categories {
		if len(w) != bitsetWords {
			return 0, 0, fmt.Errorf("%s[%d]: a bitset has %d words, got %d", p("categories"), k, bitsetWords, len(w))
		}
	}
	// Breadth first from node 0: each node is reached once (no cycle, no
	// shared subtree), children in range.
	base := int32(len(ts.nodes))
	newIdx := make([]int32, n)
	for i := range newIdx {
		newIdx[i] = -1
	}
	order := make([]int32, 0, n)
	depth := make([]int32, 0, n)
	order = append(order, 0)
	depth = append(depth, 0)
	newIdx[0] = base
	maxDepth := int32(0)
	next := base + 1
	for q := 0; q < len(order); q++ {
		i := order[q]
		l, r := td.Left[i], td.Right[i]
		if l == -1 && r == -1 {
			continue
		}
		if l < 0 || r < 0 || int(l) >= n || int(r) >= n {
			return 0, 0, fmt.Errorf("%s: node %d has children %d and %d, out of range [0, %d) (-1 and -1 for a leaf)", p("left"), i, l, r, n)
		}
		if depth[q]+1 > MaxDepth {
			return 0, 0, fmt.Errorf("%s: deeper than %d", p("left"), MaxDepth)
		}
		for _, c := range []int32{l, r} {
			if newIdx[c] != -1 || c == 0 {
				return 0, 0, fmt.Errorf("%s: node %d is reached twice (a cycle or a shared subtree)", p("left"), c)
			}
			newIdx[c] = next
			next++
			order = append(order, c)
			depth = append(depth, depth[q]+1)
		}
		maxDepth = max(maxDepth, depth[q]+1)
	}
	ts.nodes = ts.nodes[:int(base)+len(order)]
	ts.vals = ts.vals[:(int(base)+len(order))*width]
	for _, i := range order {
		ni := newIdx[i]
		nd := &ts.nodes[ni]
		l := td.Left[i]
		if l == -1 {
			nd.feat, nd.left, nd.missing = int32(nFeatures), ni, ni
			for k := range width {
				v := td.Value[int(i)*width+k]
				if !finite(v) {
					return 0, 0, fmt.Errorf("%s: node %d has a non-finite leaf value %v", p("value"), i, v)
				}
				ts.vals[int(ni)*width+k] = v * scale
			}
			if td.CatIndex != nil && td.CatIndex[i] != -1 {
				return 0, 0, fmt.Errorf("%s: leaf %d has a category set", p("catIndex"), i)
			}
			continue
		}
		f := td.Feature[i]
		if f < 0 || int(f) >= nFeatures {
			return 0, 0, fmt.Errorf("%s: node %d splits on feature %d, outside [0, %d)", p("feature"), i, f, nFeatures)
		}
		nd.feat = f
		nd.left = newIdx[l]
		if newIdx[td.Right[i]] != nd.left+1 {
			return 0, 0, fmt.Errorf("%s: internal error: children of node %d not adjacent", p("left"), i)
		}
		nd.missing = nd.left + 1
		if td.MissingLeft != nil {
			switch td.MissingLeft[i] {
			case 1:
				nd.missing = nd.left
			case 0:
			default:
				return 0, 0, fmt.Errorf("%s: node %d has %d, want 0 or 1", p("missingLeft"), i, td.MissingLeft[i])
			}
		}
		if td.CatIndex != nil && td.CatIndex[i] != -1 {
			c := td.CatIndex[i]
			if c < 0 || int(c) >= len(td.Categories) {
				return 0, 0, fmt.Errorf("%s: node %d names category set %d, the tree has %d", p("catIndex"), i, c, len(td.Categories))
			}
			if ts.known[f] == nil {
				return 0, 0, fmt.Errorf("%s: node %d is a categorical split on feature %d, which knownCategories says is numeric", p("catIndex"), i, f)
			}
			if ts.catOf == nil {
				ts.catOf = make([]int32, 0, cap(ts.nodes))
			}
			for len(ts.catOf) < int(ni) {
				ts.catOf = append(ts.catOf, -1)
			}
			ts.catOf = append(ts.catOf, int32(len(ts.cat)/bitsetWords))
			ts.cat = append(ts.cat, td.Categories[c]...)
			continue
		}
		th := td.Threshold[i]
		if math.IsNaN(th) {
			return 0, 0, fmt.Errorf("%s: node %d has a NaN threshold", p("threshold"), i)
		}
		nd.thr = nextDown32(th)
	}
	return base, maxDepth, nil
}

// catSet returns the category sets of node i (-1: numerical split).
func (ts *treeSet) catSet(i int32) int32 {
	if int(i) < len(ts.catOf) {
		return ts.catOf[i]
	}
	return -1
}

// rowBlock rows are pushed through one tree before the next, so the
// block's rows stay in cache while the trees stream past them.
const rowBlock = 64

// lanes walks proceed together (several rows through one tree): the CPU
// overlaps independent walks instead of waiting on one chain of loads.
const lanes = 8

// raw adds the leaf values of every tree for the rows of data (cols values
// each) into acc (rawCols per row), in tree order, in float64.
func (ts *treeSet) raw(data []float32, cols int, acc []float64, rawCols int) {
	rows := len(acc) / rawCols
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
		a := acc[start*rawCols : (start+n)*rawCols]
		if ts.catOf != nil {
			ts.blockCat(scratch[:n*stride], stride, n, a, rawCols)
		} else {
			ts.block(scratch[:n*stride], stride, n, a, rawCols)
		}
	}
}

// block walks n rows (stride values each, the last -Inf) through every
// tree, lanes rows of the block at a time, and adds the leaves' values.
func (ts *treeSet) block(rows []float32, stride, n int, acc []float64, ac int) {
	nodes := ts.nodes
	full := n - n%lanes
	np := unsafe.Pointer(unsafe.SliceData(nodes))
	sb := uintptr(stride) * 4
	var leaf [lanes]int32
	for t, root := range ts.roots {
		depth := int(ts.depths[t])
		off := int(ts.offs[t])
		for r := 0; r < full; r += lanes {
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
			if ts.width == 1 {
				// One value per leaf (boosting): added in place, the
				// lanes' rows ac apart.
				a := acc[r*ac+off : (r+lanes-1)*ac+off+1]
				vals := ts.vals
				a[0] += vals[i0]
				a[ac] += vals[i1]
				a[2*ac] += vals[i2]
				a[3*ac] += vals[i3]
				a[4*ac] += vals[i4]
				a[5*ac] += vals[i5]
				a[6*ac] += vals[i6]
				a[7*ac] += vals[i7]
				continue
			}
			leaf = [lanes]int32{i0, i1, i2, i3, i4, i5, i6, i7}
			ts.addLeaves(leaf[:], acc[r*ac:], ac, off)
		}
	}
	for r := full; r < n; r++ {
		ts.rowAcrossTrees(rows[r*stride:(r+1)*stride], acc[r*ac:(r+1)*ac])
	}
}

// rowAcrossTrees walks one row (its last value -Inf) through lanes trees
// at a time and adds their leaves' values into acc in tree order.
func (ts *treeSet) rowAcrossTrees(row []float32, acc []float64) {
	roots, depths := ts.roots, ts.depths
	np := unsafe.Pointer(unsafe.SliceData(ts.nodes))
	_ = row[len(row)-1] // the callers give the whole row with its sentinel
	p := unsafe.Pointer(unsafe.SliceData(row))
	var leaf [1]int32
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
		for k, i := range [lanes]int32{i0, i1, i2, i3, i4, i5, i6, i7} {
			leaf[0] = i
			ts.addLeaves(leaf[:], acc, 0, int(ts.offs[t+k]))
		}
	}
	for ; t < len(roots); t++ {
		i := roots[t]
		for range depths[t] {
			i = step(np, i, p)
		}
		leaf[0] = i
		ts.addLeaves(leaf[:], acc, 0, int(ts.offs[t]))
	}
}

// addLeaves adds the values of leaves (one per row, rows ac apart in acc)
// at offset off.
func (ts *treeSet) addLeaves(leaves []int32, acc []float64, ac, off int) {
	w := ts.width
	if w == 1 {
		for j, i := range leaves {
			acc[j*ac+off] += ts.vals[i]
		}
		return
	}
	for j, i := range leaves {
		v := ts.vals[int(i)*w : int(i)*w+w]
		a := acc[j*ac+off : j*ac+off+w]
		for k := range v {
			a[k] += v[k]
		}
	}
}

// blockCat is block for trees with categorical splits: the same order,
// with stepCat's bounds-checked step.
func (ts *treeSet) blockCat(rows []float32, stride, n int, acc []float64, ac int) {
	var leaf [1]int32
	for t, root := range ts.roots {
		depth := int(ts.depths[t])
		off := int(ts.offs[t])
		for r := range n {
			row := rows[r*stride : (r+1)*stride]
			i := root
			for range depth {
				i = ts.stepCat(i, row)
			}
			leaf[0] = i
			ts.addLeaves(leaf[:], acc[r*ac:], ac, off)
		}
	}
}

// stepCat is HistGradientBoosting's _predict_one_from_raw_data step: a
// missing value follows the node's missing direction; a categorical split
// sends a category of its set left, another category the feature saw in
// training right, and anything else (negative, unknown, 256 or more) the
// way of a missing value; the category is the value truncated to an
// integer, as scikit-learn's cast does.
func (ts *treeSet) stepCat(i int32, row []float32) int32 {
	nd := &ts.nodes[i]
	v := row[nd.feat]
	if v != v {
		return nd.missing
	}
	if c := ts.catSet(i); c >= 0 {
		if v < 0 || v >= 256 {
			return nd.missing
		}
		k := uint32(v)
		if ts.cat[int(c)*bitsetWords+int(k/32)]>>(k%32)&1 != 0 {
			return nd.left
		}
		if kn := ts.known[nd.feat]; kn[k/32]>>(k%32)&1 != 0 {
			return nd.left + 1
		}
		return nd.missing
	}
	if v > nd.thr {
		return nd.left + 1
	}
	return nd.left
}

// step moves a walk from node i one level down for the row at p. A leaf
// reads the sentinel -Inf and stays. The loads are unchecked: loading
// guarantees every child index is a node and every split feature is below
// nFeatures, leaves read slot nFeatures, and the callers check that the
// row holds nFeatures+1 values (the xgboost runtime's step, with
// scikit-learn's x <= threshold).
func step(np unsafe.Pointer, i int32, p unsafe.Pointer) int32 {
	nd := (*node)(unsafe.Add(np, uintptr(i)*unsafe.Sizeof(node{})))
	v := *(*float32)(unsafe.Add(p, uintptr(nd.feat)*4))
	next := nd.left + b2i(v > nd.thr)
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
