package modelpkg

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluiceml/sluice/internal/postproc"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/schema"
)

// problems collects what validate finds, in the order it finds it.
type problems []Problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// validate checks a decoded manifest, fills in its defaults and compiles
// its schema and golden examples: every problem, each with its key path,
// or the Spec. The golden examples are checked only when the schema
// compiled (they are rows of it).
func validate(m *Manifest) (*Spec, []Problem) {
	var ps problems
	checkFiles(&ps, m)
	if m.Drift != nil {
		checkDrift(&ps, m.Drift, m.Artifact)
	}
	if m.Logging != nil {
		checkLogging(&ps, m.Logging, m.Input.Fields)
	}
	if m.Release != nil {
		ps = append(ps, m.Release.Check("release")...)
		m.Release.Defaults()
	}
	if m.Cache != nil {
		checkCache(&ps, m.Cache)
	}
	if m.ONNX != nil {
		checkONNX(&ps, m.ONNX, m.Runtime)
	}
	if m.Features != nil {
		checkFeatures(&ps, m.Features, m.Input.Fields)
	}
	modelOuts, _ := checkSchemas(&ps, m)
	post, pprobs := postproc.Compile(modelOuts, m.Postprocess)
	for _, p := range pprobs {
		ps.add(p.Path, "%s", p.Message)
	}
	outNames, outIdx := modelOuts, map[string]int{}
	if post != nil {
		outNames = post.Names()
	}
	for i, n := range outNames {
		outIdx[n] = i
	}
	checkServing(&ps, m)

	sch, sprobs := schema.Compile(m.Input.Fields, m.Preprocess)
	for _, p := range sprobs {
		ps.add(p.Path, "%s", p.Message)
	}
	if sch == nil {
		return nil, ps
	}
	ps = append(ps, checkSequence(m, sch)...)
	if post == nil {
		return nil, ps
	}
	spec := &Spec{Manifest: *m, Schema: sch, OutputNames: outNames, ModelOutputs: modelOuts, Post: post}
	for i, g := range m.Golden {
		if gc, ok := goldenCase(&ps, fmt.Sprintf("golden[%d]", i), g, sch, post, outIdx); ok {
			spec.Golden = append(spec.Golden, gc)
		}
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return spec, nil
}

// checkFiles checks the model's name, its runtime and its artifact's file
// name (a plain file inside the package).
func checkFiles(ps *problems, m *Manifest) {
	switch {
	case m.Name == "":
		ps.add("name", "is required")
	case !ValidName(m.Name):
		ps.add("name", "%q is not a valid model name (lowercase letters, digits and '-', starting with a letter or digit, at most 63 characters)", m.Name)
	}
	if m.Runtime == "" {
		ps.add("runtime", "is required (one of: %s)", strings.Join(runtime.Names(), ", "))
	} else if _, err := runtime.Lookup(m.Runtime); err != nil {
		ps.add("runtime", "unknown runtime %q (one of: %s)", m.Runtime, strings.Join(runtime.Names(), ", "))
	}
	switch {
	case m.Artifact == "":
		ps.add("artifact", "is required: the file name of the model artifact in the package")
	case m.Artifact == ManifestFile || strings.ContainsAny(m.Artifact, `/\`) || m.Artifact == "." || m.Artifact == ".." || strings.HasPrefix(m.Artifact, "."):
		ps.add("artifact", "%q must be a plain file name inside the package (no directories, not hidden, not model.yaml)", m.Artifact)
	}
}

// checkDrift checks the drift section and fills in its defaults (10 bins,
// a 10 minute window, 100 samples).
func checkDrift(ps *problems, d *Drift, artifact string) {
	switch {
	case d.Reference == "":
		ps.add("drift.reference", "is required: a file in the package with one JSON instance per line")
	case strings.ContainsAny(d.Reference, `/\`) || strings.HasPrefix(d.Reference, ".") || d.Reference == ManifestFile || d.Reference == artifact:
		ps.add("drift.reference", "%q must be a plain file name inside the package, other than model.yaml and the artifact", d.Reference)
	}
	if d.Bins == 0 {
		d.Bins = 10
	}
	if d.Bins < 2 || d.Bins > 100 {
		ps.add("drift.bins", "must be between 2 and 100, got %d", d.Bins)
	}
	if d.Window.Duration == 0 {
		d.Window.Duration = 10 * time.Minute
	}
	if d.Window.Duration < time.Second || d.Window.Duration > 7*24*time.Hour {
		ps.add("drift.window", "must be between 1s and 168h, got %s", d.Window)
	}
	if d.MinSamples == 0 {
		d.MinSamples = 100
	}
	if d.MinSamples < 1 {
		ps.add("drift.minSamples", "must be >= 1, got %d", d.MinSamples)
	}
}

// checkLogging checks the sample rate and that every logged field is an
// input field.
func checkLogging(ps *problems, lg *Logging, inputs []schema.Field) {
	if !(lg.SampleRate >= 0 && lg.SampleRate <= 1) {
		ps.add("logging.sampleRate", "must be between 0 and 1, got %v", lg.SampleRate)
	}
	if len(lg.Fields) == 0 && (lg.SampleRate > 0 || lg.Outputs == nil) {
		// (logging: {outputs: false} alone only keeps answers out of the
		// records: no input is stored, so no field is named.)
		ps.add("logging.fields", "must name the input fields to store (only named fields are ever stored)")
	}
	declared := map[string]bool{}
	for _, f := range inputs {
		declared[f.Name] = true
	}
	for i, f := range lg.Fields {
		if !declared[f] {
			ps.add(fmt.Sprintf("logging.fields[%d]", i), "%q is not an input field", f)
		}
	}
}

// checkONNX checks the ONNX session options (runtime onnx only).
func checkONNX(ps *problems, o *runtime.SessionOptions, rt string) {
	if rt != "onnx" {
		ps.add("onnx", "session options apply to runtime onnx only (runtime is %q)", rt)
	}
	if o.IntraOpThreads < 0 || o.IntraOpThreads > 256 {
		ps.add("onnx.intraOpThreads", "must be between 0 (default) and 256, got %d", o.IntraOpThreads)
	}
	if o.InterOpThreads < 0 || o.InterOpThreads > 256 {
		ps.add("onnx.interOpThreads", "must be between 0 (default) and 256, got %d", o.InterOpThreads)
	}
}

// checkSchemas checks the schema versions and the output columns' names
// (at least one, each once) and returns them in order and by name.
func checkSchemas(ps *problems, m *Manifest) ([]string, map[string]int) {
	if m.Input.Schema == "" {
		ps.add("input.schema", "is required (a schema version like \"fraud-input@3\"); it is echoed as schemaVersion")
	}
	if m.Output.Schema == "" {
		ps.add("output.schema", "is required (a schema version like \"fraud-output@1\")")
	}
	names := make([]string, len(m.Output.Fields))
	idx := map[string]int{}
	if len(m.Output.Fields) == 0 {
		ps.add("output.fields", "must name at least one output column")
	}
	for i, f := range m.Output.Fields {
		p := fmt.Sprintf("output.fields[%d].name", i)
		if f.Name == "" {
			ps.add(p, "is required")
		} else if _, dup := idx[f.Name]; dup {
			ps.add(p, "duplicate output name %q", f.Name)
		}
		idx[f.Name] = i
		names[i] = f.Name
	}
	return names, idx
}

// checkServing fills in serving's defaults and checks its bounds, and
// placement's (checkPlacement) against the replicas.
func checkServing(ps *problems, m *Manifest) {
	s := &m.Serving
	if s.MaxInstancesPerRequest == 0 {
		s.MaxInstancesPerRequest = DefaultMaxInstancesPerRequest
	}
	if s.MaxInstancesPerRequest < 0 || s.MaxInstancesPerRequest > 1_000_000 {
		ps.add("serving.maxInstancesPerRequest", "must be between 1 and 1000000, got %d", s.MaxInstancesPerRequest)
	}
	if s.DefaultDeadline.Duration == 0 {
		s.DefaultDeadline.Duration = DefaultDeadline
	}
	if s.DefaultDeadline.Duration < 0 {
		ps.add("serving.defaultDeadline", "must be > 0, got %s", s.DefaultDeadline)
	}
	replicasSet := s.Replicas != 0
	if s.Replicas == 0 {
		s.Replicas = DefaultReplicas
	}
	if s.Replicas < 0 || s.Replicas > MaxReplicas {
		ps.add("serving.replicas", "must be between 1 and %d, got %d", MaxReplicas, s.Replicas)
	}
	if s.Memory != nil && s.Memory.Bytes == 0 {
		ps.add("serving.memory", "must be more than 0 (leave it out to use the estimate from the artifact's size)")
	}
	*ps = append(*ps, checkPlacement(m, replicasSet)...)
	if s.MaxBatchSize == 0 {
		s.MaxBatchSize = DefaultMaxBatchSize
	}
	if s.MaxBatchSize < 0 || s.MaxBatchSize > 1_000_000 {
		ps.add("serving.maxBatchSize", "must be between 1 and 1000000, got %d", s.MaxBatchSize)
	}
	if s.MaxBatchDelay.Duration < 0 || s.MaxBatchDelay.Duration > time.Second {
		ps.add("serving.maxBatchDelay", "must be between 0 (opportunistic batching) and 1s, got %s", s.MaxBatchDelay)
	}
	if s.MaxQueueInstances == 0 {
		// The default grows to fit an explicit maxInstancesPerRequest: one
		// full-size request must always be queueable.
		s.MaxQueueInstances = max(DefaultMaxQueueInstances, s.MaxInstancesPerRequest)
	}
	if s.MaxQueueInstances < 0 {
		ps.add("serving.maxQueueInstances", "must be > 0, got %d", s.MaxQueueInstances)
	} else if s.MaxQueueInstances < s.MaxInstancesPerRequest {
		ps.add("serving.maxQueueInstances", "must be >= serving.maxInstancesPerRequest (%d), got %d: a full-size request could never be queued", s.MaxInstancesPerRequest, s.MaxQueueInstances)
	}
	if s.WarmupBatches == nil {
		n := DefaultWarmupBatches
		s.WarmupBatches = &n
	}
	if w := *s.WarmupBatches; w < 0 || w > 10_000 {
		ps.add("serving.warmupBatches", "must be between 0 (no warmup) and 10000, got %d", w)
	}
}

// goldenCase compiles golden example g (at key path p) into the row (or
// token row) of sch it stands for and its expected outputs; false when the
// instance is not a valid row. A problem with its expectations is added
// but the case still returned (validate fails on any problem).
func goldenCase(ps *problems, p string, g Golden, sch *schema.Schema, post *postproc.Chain, outIdx map[string]int) (GoldenCase, bool) {
	outNames := post.Names()
	inst, ok := goldenInstance(ps, p, g.Instance)
	if !ok {
		return GoldenCase{}, false
	}
	var row []float32
	var toks []int64
	var err error
	if _, _, isSeq := sch.Sequence(); isSeq {
		toks, err = sch.Tokens(p+".instance", inst)
	} else {
		row = make([]float32, sch.Width())
		err = sch.Row(p+".instance", inst, row)
	}
	if err != nil {
		*ps = append(*ps, Problem{Path: fieldOf(err, p+".instance"), Message: msgOf(err)})
		return GoldenCase{}, false
	}
	if len(g.Expect) == 0 {
		ps.add(p+".expect", "must name at least one output and its expected value")
	}
	keys := make([]string, 0, len(g.Expect))
	for k := range g.Expect {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	expect := make(map[string]float64, len(keys))
	for _, k := range keys {
		j, ok := outIdx[k]
		if !ok {
			ps.add(p+".expect."+k, "unknown output %q (outputs: %s)", k, strings.Join(outNames, ", "))
			continue
		}
		e := g.Expect[k]
		if labels := post.Columns()[j].Labels; labels != nil {
			// A labelled output is expected by its label; compared as
			// the label's index.
			li := -1
			for i, l := range labels {
				if l == e.Value {
					li = i
				}
			}
			if li < 0 {
				ps.add(p+".expect."+k, "%q is not a label of %s (its labels: %s)", e.Value, k, strings.Join(labels, ", "))
			}
			expect[k] = float64(li)
			continue
		}
		v, err := strconv.ParseFloat(e.Value, 64)
		if e.Kind != yaml.ScalarNode || err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			ps.add(p+".expect."+k, "must be a finite number")
		}
		expect[k] = v
	}
	tol := 1e-6
	if g.Tolerance != nil {
		tol = *g.Tolerance
		if !(tol >= 0) || math.IsInf(tol, 0) {
			ps.add(p+".tolerance", "must be a finite number >= 0, got %v", tol)
		}
	}
	return GoldenCase{Row: row, Tokens: toks, Expect: expect, Tolerance: tol}, true
}

// goldenInstance decodes a golden example's instance: a mapping of field
// names to values, every value decodable.
func goldenInstance(ps *problems, p string, n yaml.Node) (schema.Instance, bool) {
	if n.Kind != yaml.MappingNode {
		ps.add(p+".instance", "must be a mapping of input field names to values")
		return nil, false
	}
	keys := make([]string, 0, len(n.Content)/2)
	vals := map[string]any{}
	bad := false
	for j := 0; j+1 < len(n.Content); j += 2 {
		k := n.Content[j].Value
		var v any
		if err := n.Content[j+1].Decode(&v); err != nil {
			ps.add(p+".instance."+k, "%v", err)
			bad = true
			continue
		}
		keys = append(keys, k)
		vals[k] = v
	}
	if bad {
		return nil, false
	}
	inst, err := schema.InstanceOf(keys, vals)
	if err != nil {
		ps.add(p+".instance", "%v", err)
		return nil, false
	}
	return inst, true
}
