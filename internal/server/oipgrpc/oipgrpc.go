// Package oipgrpc is the Open Inference Protocol v2 gRPC transport
// (inference.GRPCInferenceService), with the standard health service and
// server reflection. It decodes, authenticates (the authorization
// metadata), sets the deadline from grpc-timeout and encodes; predict calls
// go through the gateway like every other transport's, and tensors are
// converted by internal/oip, the same code OIP REST uses.
package oipgrpc

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/oip"
	pb "github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/tenant"
)

// Models answers the metadata and readiness questions (the HTTP server
// implements it).
type Models interface {
	Ready() bool
	OIPMetadata(model string, version int) (oip.Metadata, error)
	OIPModelReady(model string, version int) (bool, error)
}

// Config configures the gRPC server.
type Config struct {
	Tenants      *tenant.Set   // nil: no authentication, every caller is tenant.Default
	MaxDeadline  time.Duration // caps grpc-timeout and deadline_ms (default 60s)
	MaxRecvBytes int           // largest request message (default 1 MiB)
	MaxStreams   int           // calls open at once on the listener (default DefaultMaxStreams)
	// HandshakeTimeout and IdleTimeout replace the defaults of the same
	// names in connlimit when > 0 (tests).
	HandshakeTimeout, IdleTimeout time.Duration
	Version                       string // the build's version (ServerMetadata)
	Logger                        *slog.Logger
	// TLS, when set, makes the listener speak TLS with it (gRPC adds h2 to
	// its ALPN protocols); nil: plaintext HTTP/2.
	TLS *tls.Config
}

// Server serves GRPCInferenceService.
type Server struct {
	pb.UnimplementedGRPCInferenceServiceServer
	cfg     Config
	gw      *gateway.Gateway
	models  Models
	gs      *grpc.Server
	health  *health.Server
	streams *streamLimit
}

// New builds the gRPC server.
func New(cfg Config, gw *gateway.Gateway, models Models) *Server {
	if cfg.MaxDeadline <= 0 {
		cfg.MaxDeadline = time.Minute
	}
	if cfg.MaxRecvBytes <= 0 {
		cfg.MaxRecvBytes = 1 << 20
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, gw: gw, models: models, health: health.NewServer(), streams: newStreamLimit(cfg.MaxStreams)}
	opts := serverOptions(cfg, s.streams)
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	s.gs = grpc.NewServer(opts...)
	pb.RegisterGRPCInferenceServiceServer(s.gs, s)
	healthpb.RegisterHealthServer(s.gs, readyHealth{s.health, models})
	reflection.Register(s.gs)
	return s
}

// readyHealth answers Check from the server's readiness (as /readyz), and
// Watch from the status set on it (NOT_SERVING once draining).
type readyHealth struct {
	*health.Server
	models Models
}

func (h readyHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	resp, err := h.Server.Check(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.Status == healthpb.HealthCheckResponse_SERVING && !h.models.Ready() {
		resp.Status = healthpb.HealthCheckResponse_NOT_SERVING
	}
	return resp, nil
}

// Serve serves on ln until Stop.
func (s *Server) Serve(ln net.Listener) error {
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(pb.GRPCInferenceService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	err := s.gs.Serve(ln)
	if err == grpc.ErrServerStopped {
		return nil
	}
	return err
}

// Stop marks the server not serving and stops gracefully: in-flight calls
// finish until ctx ends, then the rest are cancelled.
func (s *Server) Stop(ctx context.Context) {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.gs.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.gs.Stop()
		<-done
	}
}

// toStatus renders an error with the gRPC column of the one error table.
func toStatus(ctx context.Context, err error) error {
	e := errs.As(err)
	if ra := errs.RetryAfterHeader(e); ra != "" {
		_ = grpc.SetHeader(ctx, metadata.Pairs("retry-after", ra))
	}
	return status.Error(errs.GRPCCode(e.Code), oip.Message(e))
}

// authenticate resolves the tenant from the authorization metadata.
func (s *Server) authenticate(ctx context.Context) (*tenant.Tenant, error) {
	if s.cfg.Tenants == nil {
		return tenant.Default, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	auth := ""
	if v := md.Get("authorization"); len(v) > 0 {
		auth = v[0]
	}
	return s.cfg.Tenants.Authenticate(auth)
}

func (s *Server) checkModel(ctx context.Context, model, version string) (int, error) {
	tn, err := s.authenticate(ctx)
	if err != nil {
		return 0, err
	}
	if err := gateway.CheckModelName("name", model); err != nil {
		return 0, err
	}
	if err := tn.Check(model); err != nil {
		return 0, err
	}
	return oip.ParseVersion(version)
}

// ServerLive is always true while the process serves.
func (s *Server) ServerLive(context.Context, *pb.ServerLiveRequest) (*pb.ServerLiveResponse, error) {
	return &pb.ServerLiveResponse{Live: true}, nil
}

// ServerReady is the server's readiness (as /readyz).
func (s *Server) ServerReady(context.Context, *pb.ServerReadyRequest) (*pb.ServerReadyResponse, error) {
	return &pb.ServerReadyResponse{Ready: s.models.Ready()}, nil
}

// ServerMetadata names the server.
func (s *Server) ServerMetadata(context.Context, *pb.ServerMetadataRequest) (*pb.ServerMetadataResponse, error) {
	return &pb.ServerMetadataResponse{Name: "sluice", Version: s.cfg.Version, Extensions: []string{}}, nil
}

// ModelReady reports whether a model (or one version) takes predictions.
// An unknown model or version is not ready (OK, ready false), as Triton
// answers it: tritonclient's is_model_ready raises on any other status.
func (s *Server) ModelReady(ctx context.Context, req *pb.ModelReadyRequest) (*pb.ModelReadyResponse, error) {
	n, err := s.checkModel(ctx, req.Name, req.Version)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	ready, err := s.models.OIPModelReady(req.Name, n)
	if err != nil && errs.As(err).Code == errs.NotFound {
		return &pb.ModelReadyResponse{Ready: false}, nil
	}
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	return &pb.ModelReadyResponse{Ready: ready}, nil
}

// ModelMetadata describes a model's (or one version's) tensors.
func (s *Server) ModelMetadata(ctx context.Context, req *pb.ModelMetadataRequest) (*pb.ModelMetadataResponse, error) {
	n, err := s.checkModel(ctx, req.Name, req.Version)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	md, err := s.models.OIPMetadata(req.Name, n)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	return oip.MetadataProto(md), nil
}

// ModelInfer runs one predict call through the gateway. The request id is
// the x-request-id metadata, else the idempotency_key parameter, else
// minted; either one the caller chose makes retries replay. The request's
// id is echoed, never an idempotency key. The deadline is the least of
// grpc-timeout (capped by --max-deadline), deadline_ms and timeout
// (Triton's microseconds), or the version's default.
func (s *Server) ModelInfer(ctx context.Context, req *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	received := time.Now()
	tn, err := s.authenticate(ctx)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	// The name is checked before the gateway records or logs the call
	// (issue 18, finding 12).
	if err := gateway.CheckModelName("model_name", req.ModelName); err != nil {
		return nil, toStatus(ctx, err)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	first := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	id, idempotent := first("x-request-id"), true
	if id != "" && !oip.ValidID(id) {
		return nil, toStatus(ctx, errs.Field(errs.InvalidArgument, "x-request-id", "must be 1 to 128 printable ASCII characters without spaces"))
	}
	if id == "" {
		// (an invalid one is refused when the parameters are decoded)
		id = req.Parameters["idempotency_key"].GetStringParam()
	}
	if id == "" || !oip.ValidID(id) {
		id, idempotent = newRequestID(), false
	}
	idField := "x-request-id"
	if first("x-request-id") == "" {
		idField = "parameters.idempotency_key"
	}
	priority := serving.Online
	if req.Parameters["sluice_priority"].GetStringParam() == "batch" {
		priority = serving.BatchJob
	}
	respID := req.Id
	if respID == "" {
		respID = id
	}
	version, verr := oip.ParseVersion(req.ModelVersion)
	var raw bool
	var outputs []string
	a := s.gw.Predict(ctx, gateway.Call{
		Transport: gateway.OIPGRPC, Tenant: tn, RequestID: id, Idempotent: idempotent, IDField: idField,
		Model: req.ModelName, Version: version, Carrier: carrier(md), Received: received, Priority: priority,
		Decode: func() (gateway.Input, error) {
			if verr != nil {
				return gateway.Input{}, verr
			}
			or, r, err := oip.FromProto(req, s.cfg.MaxDeadline)
			if err != nil {
				return gateway.Input{}, err
			}
			raw, outputs = r, or.Outputs
			in, err := oip.Input(s.gw, or, req.ModelName, version, id, first("x-routing-key"))
			if err != nil {
				return gateway.Input{}, err
			}
			if dl, ok := ctx.Deadline(); ok {
				d := time.Until(dl)
				if d > s.cfg.MaxDeadline {
					d = s.cfg.MaxDeadline
				}
				if d <= 0 {
					return gateway.Input{}, errs.New(errs.DeadlineExceeded, "the call's deadline (grpc-timeout) passed before it was decoded")
				}
				if in.Deadline == 0 || d < in.Deadline {
					in.Deadline = d
				}
			}
			return in, nil
		},
	})
	hdr := metadata.Pairs("x-request-id", id)
	if a.ModelVersion != "" {
		hdr.Set("x-model-version", a.ModelVersion)
	}
	if a.Replay {
		hdr.Set("idempotent-replay", "true")
	}
	if a.Cache != "" {
		hdr.Set("x-cache", a.Cache) // as HTTP's X-Cache; also the response parameter "cache"
	}
	_ = grpc.SetHeader(ctx, hdr)
	if a.Err != nil {
		return nil, toStatus(ctx, a.Err)
	}
	cols, err := oip.SelectOutputs(a.Prediction.Outputs, outputs)
	if err != nil {
		return nil, toStatus(ctx, err)
	}
	resp := oip.ToProto(a.Prediction, respID, cols, raw)
	if a.Cache != "" {
		resp.Parameters["cache"] = &pb.InferParameter{ParameterChoice: &pb.InferParameter_StringParam{StringParam: a.Cache}}
	}
	return resp, nil
}

func newRequestID() string {
	var b [12]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// carrier reads a caller's trace context (traceparent) from the metadata.
type mdCarrier metadata.MD

func carrier(md metadata.MD) mdCarrier { return mdCarrier(md) }

func (c mdCarrier) Get(k string) string {
	if v := metadata.MD(c).Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(k, v string) { metadata.MD(c).Set(k, v) }

func (c mdCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}
