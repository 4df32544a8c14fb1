package worker

import (
	"context"
	"strconv"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/serving"
)

// ready returns the ready version model@n, or an error saying why not.
func (w *Worker) ready(model, ver string) (*version, error) {
	n, err := strconv.ParseInt(ver, 10, 64)
	if err != nil || n < 1 {
		return nil, errs.Field(errs.InvalidArgument, "model_version", "a worker serves pinned versions: model_version must be a number >= 1, got %q", ver)
	}
	k := key(model, n)
	w.mu.Lock()
	v := w.versions[k]
	unloading := v != nil && v.unloading
	w.mu.Unlock()
	if v == nil {
		return nil, errs.New(errs.NotReady, "%s is not loaded on worker %s", k, w.cfg.ID)
	}
	select {
	case <-v.done:
	default:
		return nil, errs.New(errs.NotReady, "%s is still loading on worker %s", k, w.cfg.ID)
	}
	if v.err != nil {
		return nil, errs.New(errs.NotReady, "%s failed on worker %s: %v", k, w.cfg.ID, v.err)
	}
	if unloading {
		return nil, errs.New(errs.ShuttingDown, "%s is being unloaded from worker %s", k, w.cfg.ID)
	}
	return v, nil
}

// ModelInfer runs one request's preprocessed rows through the version's
// admission, queue and batcher. The call's deadline is the request's.
func (w *Worker) ModelInfer(ctx context.Context, req *inferencepb.ModelInferRequest) (*inferencepb.ModelInferResponse, error) {
	v, err := w.ready(req.ModelName, req.ModelVersion)
	if err != nil {
		return nil, hop.Status(err)
	}
	_, _, seq := v.spec.Schema.Sequence()
	cols := v.spec.Schema.Width()
	if seq {
		cols = 0
	}
	b, err := hop.DecodeBatch(req, cols, seq)
	if err != nil {
		return nil, hop.Status(err)
	}
	res, err := v.srv.Submit(ctx, serving.Work{Rows: b, Priority: priorityOf(req.Parameters)})
	if err != nil {
		return nil, hop.Status(err)
	}
	resp := &inferencepb.ModelInferResponse{ModelName: req.ModelName, ModelVersion: req.ModelVersion, Id: req.Id,
		Parameters: map[string]*inferencepb.InferParameter{
			hop.ParamQueueNs:   {ParameterChoice: &inferencepb.InferParameter_Int64Param{Int64Param: int64(res.Timing.Queue)}},
			hop.ParamBatchNs:   {ParameterChoice: &inferencepb.InferParameter_Int64Param{Int64Param: int64(res.Timing.BatchWait)}},
			hop.ParamComputeNs: {ParameterChoice: &inferencepb.InferParameter_Int64Param{Int64Param: int64(res.Timing.Compute)}},
		}}
	hop.EncodeOutput(resp, res.Out)
	return resp, nil
}

// ServerLive implements GRPCInferenceService.
func (w *Worker) ServerLive(context.Context, *inferencepb.ServerLiveRequest) (*inferencepb.ServerLiveResponse, error) {
	return &inferencepb.ServerLiveResponse{Live: true}, nil
}

// ServerReady implements GRPCInferenceService: a worker is ready when it runs.
func (w *Worker) ServerReady(context.Context, *inferencepb.ServerReadyRequest) (*inferencepb.ServerReadyResponse, error) {
	return &inferencepb.ServerReadyResponse{Ready: w.ctx.Err() == nil}, nil
}

// ModelReady implements GRPCInferenceService.
func (w *Worker) ModelReady(_ context.Context, req *inferencepb.ModelReadyRequest) (*inferencepb.ModelReadyResponse, error) {
	_, err := w.ready(req.Name, req.Version)
	return &inferencepb.ModelReadyResponse{Ready: err == nil}, nil
}

// ServerMetadata implements GRPCInferenceService.
func (w *Worker) ServerMetadata(context.Context, *inferencepb.ServerMetadataRequest) (*inferencepb.ServerMetadataResponse, error) {
	return &inferencepb.ServerMetadataResponse{Name: "sluice-worker", Version: w.cfg.Build}, nil
}

// ModelMetadata implements GRPCInferenceService: the hop's tensors.
func (w *Worker) ModelMetadata(_ context.Context, req *inferencepb.ModelMetadataRequest) (*inferencepb.ModelMetadataResponse, error) {
	v, err := w.ready(req.Name, req.Version)
	if err != nil {
		return nil, hop.Status(err)
	}
	type tm = inferencepb.ModelMetadataResponse_TensorMetadata
	md := &inferencepb.ModelMetadataResponse{Name: req.Name, Versions: []string{req.Version}, Platform: v.spec.Manifest.Runtime,
		Outputs: []*tm{{Name: hop.OutputTensor, Datatype: hop.FP32, Shape: []int64{-1, int64(len(v.spec.ModelOutputs))}}}}
	if _, _, seq := v.spec.Schema.Sequence(); seq {
		md.Inputs = []*tm{{Name: hop.TokensTensor, Datatype: hop.INT64, Shape: []int64{-1, -1}}, {Name: hop.LengthsTensor, Datatype: hop.INT64, Shape: []int64{-1}}}
	} else {
		md.Inputs = []*tm{{Name: hop.RowsTensor, Datatype: hop.FP32, Shape: []int64{-1, int64(v.spec.Schema.Width())}}}
	}
	return md, nil
}

// priorityOf is the serving class the gateway asked for (hop.ParamPriority:
// "low" or "batch"); absent or unknown, online.
func priorityOf(params map[string]*inferencepb.InferParameter) serving.Priority {
	if p := params[hop.ParamPriority]; p != nil {
		switch p.GetStringParam() {
		case serving.Low.String():
			return serving.Low
		case serving.BatchJob.String():
			return serving.BatchJob
		}
	}
	return serving.Online
}
