package xgboost

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// objective describes one supported objective: how base_score becomes a
// margin (XGBoost's ProbToMargin) and how a margin becomes an output
// (PredTransform), as XGBoost's CPU code does them.
type objective struct {
	margin    marginKind
	transform transformKind
	// class is true for multi-class objectives (num_class output groups).
	class bool
}

type marginKind uint8

const (
	marginIdentity marginKind = iota
	marginLogit               // -log(1/p - 1): the logistic objectives
	marginLog                 // log(p): the objectives with an exp transform
)

type transformKind uint8

const (
	transformIdentity transformKind = iota
	transformSigmoid
	transformExp
	transformHinge    // 1 if the margin is > 0, else 0
	transformSoftprob // softmax over the class margins
	transformSoftmax  // the index of the largest class margin
	transformSort     // each row's quantiles in ascending order (reg:quantileerror from XGBoost 3.4 on)
)

// objectives are the objectives XGBoost registers that a tree model can be
// trained with, except reg:expectileerror (its base_score is a softplus
// chain across targets).
var objectives = map[string]objective{
	"binary:logistic":      {margin: marginLogit, transform: transformSigmoid},
	"reg:logistic":         {margin: marginLogit, transform: transformSigmoid},
	"binary:logitraw":      {},
	"binary:hinge":         {transform: transformHinge},
	"reg:squarederror":     {},
	"reg:linear":           {}, // the deprecated name of reg:squarederror
	"reg:squaredlogerror":  {},
	"reg:absoluteerror":    {},
	"reg:pseudohubererror": {},
	"reg:quantileerror":    {},
	"reg:tweedie":          {margin: marginLog, transform: transformExp},
	"reg:gamma":            {margin: marginLog, transform: transformExp},
	"count:poisson":        {margin: marginLog, transform: transformExp},
	"survival:cox":         {margin: marginLog, transform: transformExp},
	"survival:aft":         {margin: marginLog, transform: transformExp},
	"rank:pairwise":        {},
	"rank:ndcg":            {},
	"rank:map":             {},
	"multi:softprob":       {transform: transformSoftprob, class: true},
	"multi:softmax":        {transform: transformSoftmax, class: true},
}

// supportedObjectives lists the objectives for error messages, sorted.
var supportedObjectives = func() string {
	names := make([]string, 0, len(objectives))
	for n := range objectives {
		if n != "reg:linear" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}()

func (o objective) multi() bool { return o.class }

// probToMargin mirrors the objectives' ProbToMargin in XGBoost: base_score is
// stored in output space and turned into a margin when the model is loaded.
// The arithmetic is done in float32 where XGBoost does it in float32.
// binary:logitraw keeps base_score as the margin unchanged (checked against
// XGBoost 1.7.4 by the binary_logitraw fixture, trained with base_score 0.3).
func (o objective) probToMargin(name string, p float32) (float32, error) {
	m := p
	switch o.margin {
	case marginLogit:
		if !(p > 0 && p < 1) {
			return 0, fmt.Errorf("base_score %v must be in (0, 1) for a logistic objective", p)
		}
		t := float32(1)/p - float32(1)
		m = -float32(math.Log(float64(t)))
	case marginLog:
		if !(p > 0) {
			return 0, fmt.Errorf("base_score %v must be positive for %s", p, name)
		}
		m = float32(math.Log(float64(p)))
	}
	if math.IsNaN(float64(m)) || math.IsInf(float64(m), 0) {
		return 0, fmt.Errorf("base_score %v gives margin %v, which is not finite", p, m)
	}
	return m, nil
}

// Limits that keep a hostile artifact from making the loader do absurd work.
// They are far above anything XGBoost produces for a servable model.
const (
	maxTrees    = 1 << 20
	maxFeatures = 1 << 24
	maxClasses  = 1 << 16
	maxDepth    = 1024
	// maxTotalNodes bounds the flattened array (16 bytes a node).
	maxTotalNodes = 1 << 27
)

// node is one flattened tree node. Children of a split are adjacent: left is
// at index left, right at left+1, and a missing value goes to index missing.
//
// A leaf loops to itself: its feat is the index of a slot that always holds
// -Inf (the predictor appends one to every row), which is below any finite
// leaf value, and its left and missing are its own index, so stepping from a
// leaf stays on it. That lets the predictor walk a
// tree a fixed number of steps (the tree's depth) without testing for
// leaves, several rows at once, with no data-dependent branches. For a leaf,
// value is the leaf value; for a split, the threshold.
type node struct {
	feat    int32
	value   float32
	left    int32
	missing int32
}

// catSpan is one categorical split's bitset: catWords[off:off+n].
type catSpan struct{ off, n int32 }

// parsed is a validated model before it becomes a Model.
type parsed struct {
	obj         objective
	objName     string
	booster     string    // gbtree or dart
	treeWeights []float32 // dart: weight_drop, one per tree; nil for gbtree
	numFeature  int
	numGroup    int // margin columns: num_class for multi-class, else 1
	baseMargin  []float32
	nodes       []node
	roots       []int32 // index of each tree's root in nodes
	depths      []int32 // depth of each tree (edges on its longest path)
	groups      []int32 // output group of each tree
	version     string
	// Categorical splits (nil when the model has none): catOf[i] is the
	// index in catSpans of node i's category set, or -1 for a numerical
	// split or a leaf; a span is a bitset in catWords.
	catOf    []int32
	catSpans []catSpan
	catWords []uint32
	// featureNames and featureTypes are learner.feature_names and
	// feature_types: nil, or one per feature.
	featureNames, featureTypes []string
}

func parseModel(b []byte) (*parsed, error) {
	root, err := decodeArtifact(b)
	if err != nil {
		return nil, err
	}
	top, err := object(root, "model")
	if err != nil {
		return nil, err
	}
	p := &parsed{}
	var version []int64
	if v, ok := top["version"]; ok {
		if vs, err := int64s(v, "version"); err == nil {
			version = vs
			parts := make([]string, len(vs))
			for i, n := range vs {
				parts[i] = fmt.Sprint(n)
			}
			p.version = strings.Join(parts, ".")
		}
	}
	learner, err := objectField(top, "learner", "model")
	if err != nil {
		return nil, err
	}
	gb, err := objectField(learner, "gradient_booster", "learner")
	if err != nil {
		return nil, err
	}
	if p.booster, err = stringField(gb, "name", "learner.gradient_booster"); err != nil {
		return nil, err
	}
	// A dart booster is a gbtree (under "gbtree") and a weight per tree.
	trees := gb
	const gbWhat = "learner.gradient_booster"
	switch p.booster {
	case "gbtree":
	case "dart":
		if trees, err = objectField(gb, "gbtree", gbWhat); err != nil {
			return nil, err
		}
		wv, err := field(gb, "weight_drop", gbWhat)
		if err != nil {
			return nil, err
		}
		if p.treeWeights, err = float32s(wv, gbWhat+".weight_drop"); err != nil {
			return nil, err
		}
		for i, w := range p.treeWeights {
			if math.IsNaN(float64(w)) || math.IsInf(float64(w), 0) {
				return nil, fmt.Errorf("%s.weight_drop[%d] is %v, want a finite number", gbWhat, i, w)
			}
		}
	default:
		return nil, fmt.Errorf("booster %q is not supported (supported: gbtree, dart)", p.booster)
	}
	objo, err := objectField(learner, "objective", "learner")
	if err != nil {
		return nil, err
	}
	if p.objName, err = stringField(objo, "name", "learner.objective"); err != nil {
		return nil, err
	}
	obj, ok := objectives[p.objName]
	if !ok {
		return nil, fmt.Errorf("objective %q is not supported (supported: %s)", p.objName, supportedObjectives)
	}
	if p.objName == "reg:quantileerror" && versionAtLeast(version, 3, 4) {
		// From 3.4 on, predict sorts each row's quantiles so that they
		// never cross.
		obj.transform = transformSort
	}
	p.obj = obj

	mp, err := objectField(learner, "learner_model_param", "learner")
	if err != nil {
		return nil, err
	}
	const mpWhat = "learner.learner_model_param"
	if p.numFeature, err = intField(mp, "num_feature", mpWhat, 1, maxFeatures); err != nil {
		return nil, err
	}
	numClass, err := intField(mp, "num_class", mpWhat, 0, maxClasses)
	if err != nil {
		return nil, err
	}
	numTarget := 1
	if _, ok := mp["num_target"]; ok {
		if numTarget, err = intField(mp, "num_target", mpWhat, 0, maxClasses); err != nil {
			return nil, err
		}
	}
	// Output groups: num_class for a multi-class objective, num_target
	// for a multi-target one (several labels, or several quantiles), each
	// group its own trees (tree_info) and its own base_score.
	p.numGroup = 1
	switch {
	case obj.multi():
		if numClass < 2 {
			return nil, fmt.Errorf("objective %s needs num_class >= 2, model has %d", p.objName, numClass)
		}
		if numTarget > 1 {
			return nil, fmt.Errorf("objective %s with num_target = %d is not supported", p.objName, numTarget)
		}
		p.numGroup = numClass
	case numClass > 1:
		return nil, fmt.Errorf("objective %s with num_class = %d is not supported", p.objName, numClass)
	case numTarget > 1:
		p.numGroup = numTarget
	}
	if err := p.readBaseScore(mp); err != nil {
		return nil, err
	}
	if p.featureNames, err = featureStrings(learner, "feature_names", p.numFeature); err != nil {
		return nil, err
	}
	if p.featureTypes, err = featureStrings(learner, "feature_types", p.numFeature); err != nil {
		return nil, err
	}

	model, err := objectField(trees, "model", "learner.gradient_booster")
	if err != nil {
		return nil, err
	}
	if err := p.readTrees(model); err != nil {
		return nil, err
	}
	return p, nil
}

// versionAtLeast reports whether the model's version (major, minor, patch)
// is at least major.minor.
func versionAtLeast(v []int64, major, minor int64) bool {
	if len(v) < 2 {
		return false
	}
	return v[0] > major || v[0] == major && v[1] >= minor
}

// featureStrings reads learner.feature_names or feature_types: absent or
// empty (a model trained on an unnamed array), or one string per feature.
func featureStrings(learner map[string]any, key string, numFeature int) ([]string, error) {
	v, ok := learner[key]
	if !ok {
		return nil, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("learner.%s: want an array of strings, got %s", key, typeName(v))
	}
	if len(arr) == 0 {
		return nil, nil
	}
	if len(arr) != numFeature {
		return nil, fmt.Errorf("learner.%s has %d entries for %d features", key, len(arr), numFeature)
	}
	out := make([]string, len(arr))
	for i, x := range arr {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("learner.%s[%d]: want a string, got %s", key, i, typeName(x))
		}
		out[i] = s
	}
	return out, nil
}

// readBaseScore reads base_score: a number or numeric string, or (newer
// XGBoost) a bracketed list with one value or one per output group.
func (p *parsed) readBaseScore(mp map[string]any) error {
	v, err := field(mp, "base_score", "learner.learner_model_param")
	if err != nil {
		return err
	}
	var scores []float32
	if s, ok := v.(string); ok && strings.HasPrefix(strings.TrimSpace(s), "[") {
		s = strings.TrimSpace(s)
		if !strings.HasSuffix(s, "]") {
			return fmt.Errorf("base_score: malformed list %q", s)
		}
		for _, part := range strings.Split(s[1:len(s)-1], ",") {
			f, err := float32Value(part, "base_score")
			if err != nil {
				return err
			}
			scores = append(scores, f)
		}
	} else if arrayLen(v) >= 0 {
		if scores, err = float32s(v, "base_score"); err != nil {
			return err
		}
	} else {
		f, err := float32Value(v, "base_score")
		if err != nil {
			return err
		}
		scores = []float32{f}
	}
	switch {
	case len(scores) == 1:
		s := scores[0]
		scores = make([]float32, p.numGroup)
		for i := range scores {
			scores[i] = s
		}
	case len(scores) != p.numGroup:
		return fmt.Errorf("base_score has %d values, model has %d output groups", len(scores), p.numGroup)
	}
	p.baseMargin = make([]float32, p.numGroup)
	for i, s := range scores {
		m, err := p.obj.probToMargin(p.objName, s)
		if err != nil {
			return err
		}
		p.baseMargin[i] = m
	}
	return nil
}

func (p *parsed) readTrees(model map[string]any) error {
	const what = "gradient_booster.model"
	mparam, err := objectField(model, "gbtree_model_param", what)
	if err != nil {
		return err
	}
	numTrees, err := intField(mparam, "num_trees", what+".gbtree_model_param", 0, maxTrees)
	if err != nil {
		return err
	}
	if _, ok := mparam["num_parallel_tree"]; ok {
		// Only iteration ranges need it, and Sluice always predicts with
		// every tree; still, it must be sane.
		npt, err := intField(mparam, "num_parallel_tree", what+".gbtree_model_param", 1, maxTrees)
		if err != nil {
			return err
		}
		if numTrees%npt != 0 {
			return fmt.Errorf("num_trees %d is not a multiple of num_parallel_tree %d", numTrees, npt)
		}
	}
	tv, err := field(model, "trees", what)
	if err != nil {
		return err
	}
	trees, ok := tv.([]any)
	if !ok {
		return fmt.Errorf("%s.trees: want an array, got %s", what, typeName(tv))
	}
	if len(trees) != numTrees {
		return fmt.Errorf("%s: num_trees is %d but there are %d trees", what, numTrees, len(trees))
	}
	iv, err := field(model, "tree_info", what)
	if err != nil {
		return err
	}
	info, err := int64s(iv, what+".tree_info")
	if err != nil {
		return err
	}
	if len(info) != numTrees {
		return fmt.Errorf("%s: tree_info has %d entries for %d trees", what, len(info), numTrees)
	}
	if p.treeWeights != nil && len(p.treeWeights) != numTrees {
		return fmt.Errorf("learner.gradient_booster.weight_drop has %d weights for %d trees", len(p.treeWeights), numTrees)
	}
	p.roots = make([]int32, numTrees)
	p.groups = make([]int32, numTrees)
	for t, g := range info {
		if g < 0 || g >= int64(p.numGroup) {
			return fmt.Errorf("tree %d: output group %d out of range (model has %d groups)", t, g, p.numGroup)
		}
		p.groups[t] = int32(g)
	}
	for t, tv := range trees {
		tm, err := object(tv, fmt.Sprintf("tree %d", t))
		if err != nil {
			return err
		}
		rt, err := readTree(tm, p.numFeature, maxCatWords-len(p.catWords))
		if err != nil {
			return treeErr(t, err)
		}
		if p.treeWeights != nil {
			// Dart predicts margin += leaf * weight, the product rounded
			// to float32 (gbtree.cc, Dart::PredictBatchImpl): scaling
			// each leaf once here gives the same sums bit for bit.
			w := p.treeWeights[t]
			for i, l := range rt.left {
				if l == -1 {
					rt.cond[i] *= w
				}
			}
		}
		p.roots[t] = int32(len(p.nodes))
		var depth int
		var cats []catAt
		if p.nodes, cats, depth, err = rt.flatten(p.nodes, int32(p.numFeature)); err != nil {
			return treeErr(t, err)
		}
		p.depths = append(p.depths, int32(depth))
		if err := p.addCats(rt, cats); err != nil {
			return treeErr(t, err)
		}
	}
	if p.catOf != nil {
		for len(p.catOf) < len(p.nodes) {
			p.catOf = append(p.catOf, -1)
		}
	}
	return nil
}

// catAt says that the node at slot of the flattened array is tree node id,
// a categorical split.
type catAt struct{ slot, id int }

// maxCatWords bounds the categories' bitsets of a model in 32-bit words
// (64 MiB): XGBoost keeps the same bitsets, so a real model stays far below.
const maxCatWords = 1 << 24

// addCats records the category sets of a flattened tree's categorical
// splits: p.catOf[slot] indexes p.catSpans, which points into p.catWords.
func (p *parsed) addCats(rt *rawTree, cats []catAt) error {
	if len(cats) == 0 {
		return nil
	}
	for _, c := range cats {
		set := rt.cats[c.id]
		if len(p.catWords)+len(set) > maxCatWords {
			return fmt.Errorf("node %d: the categorical splits' category sets exceed %d words", c.id, maxCatWords)
		}
		for len(p.catOf) <= c.slot {
			p.catOf = append(p.catOf, -1)
		}
		p.catOf[c.slot] = int32(len(p.catSpans))
		p.catSpans = append(p.catSpans, catSpan{off: int32(len(p.catWords)), n: int32(len(set))})
		p.catWords = append(p.catWords, set...)
	}
	return nil
}

// treeErr puts the tree number in front of err: "tree 12 node 7: ..." for a
// node's error, "tree 12: ..." otherwise.
func treeErr(t int, err error) error {
	if strings.HasPrefix(err.Error(), "node ") {
		return fmt.Errorf("tree %d %w", t, err)
	}
	return fmt.Errorf("tree %d: %w", t, err)
}

// rawTree is one tree as stored: parallel arrays indexed by node id.
type rawTree struct {
	left, right []int64
	feat        []int64
	cond        []float32
	defaultLeft []int64
	// cats holds the category bitset of each categorical split (bit c of
	// word c/32, least significant first, is set when category c goes
	// right); nil when the tree has none, nil entries for numerical nodes.
	cats [][]uint32
}

// readTree reads one tree; its category bitsets may take catBudget words.
func readTree(m map[string]any, numFeature, catBudget int) (*rawTree, error) {
	tp, err := objectField(m, "tree_param", "tree")
	if err != nil {
		return nil, err
	}
	n, err := intField(tp, "num_nodes", "tree_param", 1, maxTotalNodes)
	if err != nil {
		return nil, err
	}
	if v, ok := tp["size_leaf_vector"]; ok {
		if s, err := intValue(v, "tree_param.size_leaf_vector"); err != nil {
			return nil, err
		} else if s > 1 {
			return nil, fmt.Errorf("vector leaves (multi_strategy \"multi_output_tree\") are not supported (size_leaf_vector = %d); train with the default multi_strategy \"one_output_per_tree\"", s)
		}
	}
	ints := func(key string) ([]int64, error) {
		v, err := field(m, key, "tree")
		if err != nil {
			return nil, err
		}
		if l := arrayLen(v); l != n {
			if l < 0 {
				return nil, fmt.Errorf("%s: want an array, got %s", key, typeName(v))
			}
			return nil, fmt.Errorf("%s has %d entries, tree has %d nodes", key, l, n)
		}
		return int64s(v, key)
	}
	t := &rawTree{}
	if t.left, err = ints("left_children"); err != nil {
		return nil, err
	}
	if t.right, err = ints("right_children"); err != nil {
		return nil, err
	}
	if t.feat, err = ints("split_indices"); err != nil {
		return nil, err
	}
	if t.defaultLeft, err = ints("default_left"); err != nil {
		return nil, err
	}
	cv, err := field(m, "split_conditions", "tree")
	if err != nil {
		return nil, err
	}
	if l := arrayLen(cv); l != n {
		if l < 0 {
			return nil, fmt.Errorf("split_conditions: want an array, got %s", typeName(cv))
		}
		return nil, fmt.Errorf("split_conditions has %d entries, tree has %d nodes", l, n)
	}
	if t.cond, err = float32s(cv, "split_conditions"); err != nil {
		return nil, err
	}
	var splitType []int64
	if _, ok := m["split_type"]; ok {
		if splitType, err = ints("split_type"); err != nil {
			return nil, err
		}
	}
	if err := t.readCategories(m, splitType, catBudget); err != nil {
		return nil, err
	}
	for i := range n {
		if t.left[i] == -1 {
			continue // leaf: right and split index are not used
		}
		if f := t.feat[i]; f < 0 || f >= int64(numFeature) {
			return nil, fmt.Errorf("node %d: split feature %d out of range (model has %d features)", i, f, numFeature)
		}
		if c := t.cond[i]; math.IsNaN(float64(c)) && (t.cats == nil || t.cats[i] == nil) {
			return nil, fmt.Errorf("node %d: split condition is NaN", i)
		}
		if d := t.defaultLeft[i]; d != 0 && d != 1 {
			return nil, fmt.Errorf("node %d: default_left %d is not 0 or 1", i, d)
		}
	}
	return t, nil
}

// maxCategory bounds a category code: XGBoost's OutOfRangeCat (2^24), the
// first float32 past which integers are no longer exact. A code at or above
// it, or below 0, is an invalid category, which XGBoost sends left.
const maxCategory = 1 << 24

// readCategories reads the categorical splits: split_type (1 for a
// categorical split) and, for the nodes listed in categories_nodes, the
// categories that go right (categories[categories_segments[k]:][:categories_sizes[k]]).
// XGBoost writes these for every tree from 1.6 on (empty arrays in a tree
// without categorical splits).
func (t *rawTree) readCategories(m map[string]any, splitType []int64, budget int) error {
	n := len(t.left)
	isCat := func(i int) bool { return splitType != nil && splitType[i] == 1 && t.left[i] != -1 }
	anyCat := false
	for i, s := range splitType {
		if s != 0 && s != 1 {
			return fmt.Errorf("node %d: split_type %d is not 0 (numerical) or 1 (categorical)", i, s)
		}
		anyCat = anyCat || isCat(i)
	}
	arr := func(key string) ([]int64, error) {
		v, ok := m[key]
		if !ok {
			if anyCat {
				return nil, fmt.Errorf("categorical splits without %s", key)
			}
			return nil, nil
		}
		return int64s(v, key)
	}
	nodes, err := arr("categories_nodes")
	if err != nil {
		return err
	}
	if !anyCat {
		if len(nodes) > 0 {
			return fmt.Errorf("categories_nodes lists %d nodes, but split_type marks no categorical split", len(nodes))
		}
		return nil
	}
	segs, err := arr("categories_segments")
	if err != nil {
		return err
	}
	sizes, err := arr("categories_sizes")
	if err != nil {
		return err
	}
	cats, err := arr("categories")
	if err != nil {
		return err
	}
	if len(segs) != len(nodes) || len(sizes) != len(nodes) {
		return fmt.Errorf("categories_nodes has %d entries, categories_segments %d, categories_sizes %d: want the same", len(nodes), len(segs), len(sizes))
	}
	t.cats = make([][]uint32, n)
	for k, id := range nodes {
		if id < 0 || id >= int64(n) {
			return fmt.Errorf("categories_nodes[%d]: node %d out of range (tree has %d nodes)", k, id, n)
		}
		if !isCat(int(id)) {
			return fmt.Errorf("node %d: has categories but is not a categorical split", id)
		}
		if t.cats[id] != nil {
			return fmt.Errorf("node %d: categories given twice", id)
		}
		beg, size := segs[k], sizes[k]
		if beg < 0 || size < 0 || beg > int64(len(cats)) || size > int64(len(cats))-beg {
			return fmt.Errorf("node %d: categories [%d, %d+%d) out of range (%d categories)", id, beg, beg, size, len(cats))
		}
		set := cats[beg : beg+size]
		top := int64(-1)
		for _, c := range set {
			if c < 0 || c >= maxCategory {
				return fmt.Errorf("node %d: category %d out of range [0, %d)", id, c, maxCategory)
			}
			top = max(top, c)
		}
		words := int((top + 1 + 31) / 32)
		if budget -= words; budget < 0 {
			return fmt.Errorf("node %d: the categorical splits' category sets exceed %d words", id, maxCatWords)
		}
		bits := make([]uint32, words)
		for _, c := range set {
			bits[c/32] |= 1 << (c % 32)
		}
		t.cats[id] = bits // non-nil even when empty: every category goes left
	}
	for i := range n {
		if isCat(i) && t.cats[i] == nil {
			return fmt.Errorf("node %d: categorical split without categories (not in categories_nodes)", i)
		}
	}
	return nil
}

// flatten validates the tree's shape and appends its reachable nodes to out
// in breadth-first order, children adjacent. A node id is a leaf when its
// left child is -1; otherwise both children must be valid node ids, and every
// node may be reached at most once (which rules out cycles and shared
// subtrees). Unreachable nodes (XGBoost's deleted nodes) are dropped.
// sentinel is the feature index leaves read (always -Inf). It returns the
// tree's depth.
func (t *rawTree) flatten(out []node, sentinel int32) ([]node, []catAt, int, error) {
	n := len(t.left)
	if len(out)+n > maxTotalNodes {
		return nil, nil, 0, fmt.Errorf("model has more than %d nodes", maxTotalNodes)
	}
	var cats []catAt
	depth := 0
	seen := make([]bool, n)
	type item struct {
		id, depth int
	}
	base := len(out)
	queue := []item{{0, 0}}
	seen[0] = true
	out = append(out, node{})
	for qi := 0; qi < len(queue); qi++ {
		it := queue[qi]
		slot := base + qi // BFS order: queue position == slot
		id := it.id
		l, r := t.left[id], t.right[id]
		if l == -1 {
			v := t.cond[id]
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, nil, 0, fmt.Errorf("node %d: leaf value %v is not finite", id, v)
			}
			out[slot] = node{feat: sentinel, value: v, left: int32(slot), missing: int32(slot)}
			depth = max(depth, it.depth)
			continue
		}
		for _, c := range [2]struct {
			name string
			id   int64
		}{{"left", l}, {"right", r}} {
			if c.id < 0 || c.id >= int64(n) {
				return nil, nil, 0, fmt.Errorf("node %d: %s child %d out of range (tree has %d nodes)", id, c.name, c.id, n)
			}
			if c.id == 0 || seen[c.id] {
				return nil, nil, 0, fmt.Errorf("node %d: %s child %d is reached twice (cycle or shared subtree)", id, c.name, c.id)
			}
			seen[c.id] = true
		}
		if it.depth+1 > maxDepth {
			return nil, nil, 0, fmt.Errorf("node %d: tree deeper than %d", id, maxDepth)
		}
		left := int32(base + len(queue))
		queue = append(queue, item{int(l), it.depth + 1}, item{int(r), it.depth + 1})
		out = append(out, node{}, node{})
		missing := left + 1
		if t.defaultLeft[id] == 1 {
			missing = left
		}
		out[slot] = node{feat: int32(t.feat[id]), value: t.cond[id], left: left, missing: missing}
		if t.cats != nil && t.cats[id] != nil {
			// A categorical split's value is NaN (XGBoost's split
			// condition for one; forced, whatever the file says), which
			// tells stepCat to test the category set.
			out[slot].value = float32(math.NaN())
			cats = append(cats, catAt{slot: slot, id: id})
		}
	}
	return out, cats, depth, nil
}
