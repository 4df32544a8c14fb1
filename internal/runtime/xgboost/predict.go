package xgboost

import "math"

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
		m.block(scratch[:n*stride], stride, n, out[start*ng:(start+n)*ng])
	}
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
		for t, root := range m.roots {
			depth := int(m.depths[t])
			g := int(m.groups[t])
			for r := 0; r < full; r += lanes {
				var idx [lanes]int32
				for k := range idx {
					idx[k] = root
				}
				base := rows[r*stride : (r+lanes)*stride]
				for range depth {
					for k := range lanes {
						nd := &nodes[idx[k]]
						v := base[k*stride+int(nd.feat)]
						next := nd.left + 1
						if v < nd.value {
							next = nd.left
						}
						if v != v {
							next = nd.missing
						}
						idx[k] = next
					}
				}
				for k := range lanes {
					acc[(r+k)*ng+g] += nodes[idx[k]].value
				}
			}
		}
	}
	for r := full; r < n; r++ {
		m.rowAcrossTrees(rows[r*stride:(r+1)*stride], acc[r*ng:(r+1)*ng])
	}
}

// rowAcrossTrees walks one row through lanes trees at a time and adds the
// leaf values into acc in tree order.
func (m *Model) rowAcrossTrees(row []float32, acc []float32) {
	nodes := m.nodes
	roots, depths, groups := m.roots, m.depths, m.groups
	t := 0
	for ; t+lanes <= len(roots); t += lanes {
		var idx [lanes]int32
		copy(idx[:], roots[t:t+lanes])
		depth := int32(0)
		for _, d := range depths[t : t+lanes] {
			depth = max(depth, d)
		}
		for range depth {
			for k := range lanes {
				nd := &nodes[idx[k]]
				v := row[nd.feat]
				next := nd.left + 1
				if v < nd.value {
					next = nd.left
				}
				if v != v {
					next = nd.missing
				}
				idx[k] = next
			}
		}
		for k := range lanes {
			acc[groups[t+k]] += nodes[idx[k]].value
		}
	}
	for ; t < len(roots); t++ {
		acc[groups[t]] += walk(nodes, roots[t], int(depths[t]), row)
	}
}

// walk takes depth steps from root for one row and returns the leaf value.
// Loading guarantees every index is in range and every walk of depth steps
// ends on a leaf (leaves loop to themselves).
func walk(nodes []node, root int32, depth int, row []float32) float32 {
	i := root
	for range depth {
		nd := &nodes[i]
		v := row[nd.feat]
		next := nd.left + 1
		if v < nd.value {
			next = nd.left
		}
		if v != v {
			next = nd.missing
		}
		i = next
	}
	return nodes[i].value
}
