package placement

// Estimate is one replica's memory before its first load has been
// measured: override (serving.memory) when > 0, else a linear function of
// the artifact's size per runtime, perByte × artifact bytes + overhead.
//
// The figures were calibrated on this repository's examples by the
// worker's own measure (the RSS growth over hosting.Start with the heap
// collected before and after; SLUICE_MEASURE=1 TestMeasureExamples in
// internal/worker), on linux/amd64, per replica:
//
//	churn  linear    201 B artifact: 0.40 MiB (1st), ~0 MiB (more replicas)
//	iris   xgboost  23 KB artifact: 0.14 MiB (6.4x), 0.05 MiB (2.3x)
//	fraud  xgboost 184 KB artifact: 0.30 MiB (1.7x), 0.13 MiB (0.7x)
//	mlp    onnx    297 KB artifact: 32.75 MiB for the first ONNX load in
//	       the process (ONNX Runtime's library and environment, once per
//	       process), then 0.48 MiB (1.7x)
//	seq    onnx      8 KB artifact: 1.70 MiB (1st), 0.03 MiB
//
// hence k ≈ 3 for xgboost and 2 for onnx, plus a fixed overhead. The once
// per process ONNX Runtime cost (~31 MiB) is not per replica: it is
// charged to the first ONNX version a worker measures. The examples are
// small; bigger artifacts will refine k. The curves are rounded up: an
// estimate that is too small over-commits a worker until the first
// measurement corrects it, one too large only places the first load more
// cautiously.
func Estimate(runtime string, artifactBytes, override int64) int64 {
	if override > 0 {
		return override
	}
	c := estimateFor(runtime)
	return c.overhead + int64(c.perByte*float64(max(artifactBytes, 0)))
}

type estimateCurve struct {
	perByte  float64
	overhead int64
}

// estimateFor is the curve of a runtime.
func estimateFor(runtime string) estimateCurve {
	switch runtime {
	case "xgboost":
		return estimateCurve{perByte: 3, overhead: 256 << 10}
	case "sklearn":
		// JSON of about 60 bytes per tree node becomes 16 bytes of node
		// and 8 per leaf value: the model is smaller than its artifact.
		return estimateCurve{perByte: 1, overhead: 256 << 10}
	case "linear":
		return estimateCurve{perByte: 4, overhead: 512 << 10}
	case "onnx":
		return estimateCurve{perByte: 2, overhead: 2 << 20}
	case "synthetic":
		// cost.json is tiny; the real figure is its "memory" key, which
		// the first load measures.
		return estimateCurve{perByte: 0, overhead: 1 << 20}
	case "oip":
		// The model lives in another server; only the client is here.
		return estimateCurve{perByte: 0, overhead: 1 << 20}
	}
	return estimateCurve{perByte: 4, overhead: 16 << 20}
}
