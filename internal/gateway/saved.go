package gateway

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/features"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/tenant"
)

// SavedAnswers finds the answer saved with a record, for a retry the
// idempotency cache does not know (records.Store implements it).
type SavedAnswers interface {
	Lookup(ctx context.Context, tenant, requestID string, now time.Time) (*records.Found, error)
}

// savedAnswer is the stored form of an Answer: what a transport needs to
// render it again byte for byte (the outputs as little-endian float32
// bits, so nothing is rounded).
type savedAnswer struct {
	V            int         `json:"v"` // format: 1
	ModelVersion string      `json:"mv,omitempty"`
	Prediction   *savedPred  `json:"p,omitempty"`
	Err          *savedError `json:"e,omitempty"`
}

type savedPred struct {
	Model        string   `json:"model"`
	Version      int      `json:"version"`
	ID           string   `json:"id"`
	InputSchema  string   `json:"in,omitempty"`
	OutputSchema string   `json:"out,omitempty"`
	Outputs      []string `json:"outputs"`
	Rows         int      `json:"rows"`
	Cols         int      `json:"cols"`
	Data         []byte   `json:"data"`
	// FeatureFields and FeatureOrigins are the answer's featureSources
	// (a version with features:): the filled fields, and per instance one
	// digit per field, its features.Origin.
	FeatureFields  []string `json:"ff,omitempty"`
	FeatureOrigins []string `json:"fo,omitempty"`
	// Labels are the labelled outputs' labels (Prediction.Labels).
	Labels [][]string `json:"labels,omitempty"`
}

type savedError struct {
	Code    errs.Code `json:"code"`
	Message string    `json:"message"`
	Field   string    `json:"field,omitempty"`
}

// encodeAnswer is a's stored form, or nil when it is over
// records.MaxReplayBytes.
func encodeAnswer(a *Answer) []byte {
	s := savedAnswer{V: 1, ModelVersion: a.ModelVersion}
	if p := a.Prediction; p != nil {
		data := make([]byte, 4*len(p.Out.Data))
		for i, f := range p.Out.Data {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(f))
		}
		s.Prediction = &savedPred{Model: p.Model, Version: p.Version, ID: p.ID, InputSchema: p.InputSchema, OutputSchema: p.OutputSchema,
			Outputs: p.Outputs, Rows: p.Out.Rows, Cols: p.Out.Cols, Data: data, Labels: p.Labels}
		if f := p.Features; f != nil {
			s.Prediction.FeatureFields = f.Fields
			s.Prediction.FeatureOrigins = make([]string, len(f.Origins))
			for i, ors := range f.Origins {
				b := make([]byte, len(ors))
				for k, o := range ors {
					b[k] = '0' + byte(o)
				}
				s.Prediction.FeatureOrigins[i] = string(b)
			}
		}
	}
	if e := a.Err; e != nil {
		s.Err = &savedError{Code: e.Code, Message: e.Message, Field: e.Field}
	}
	b, err := json.Marshal(s)
	if err != nil || len(b) > records.MaxReplayBytes {
		return nil
	}
	return b
}

// decodeAnswer reads an encodeAnswer form back.
func decodeAnswer(b []byte, requestID string) (*Answer, error) {
	var s savedAnswer
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decode saved answer: %w", err)
	}
	if s.V != 1 {
		return nil, fmt.Errorf("decode saved answer: format %d, want 1", s.V)
	}
	a := &Answer{RequestID: requestID, ModelVersion: s.ModelVersion}
	if p := s.Prediction; p != nil {
		if len(p.Data) != 4*p.Rows*p.Cols {
			return nil, fmt.Errorf("decode saved answer: %d bytes of outputs for %d×%d", len(p.Data), p.Rows, p.Cols)
		}
		out := runtime.Output{Rows: p.Rows, Cols: p.Cols, Data: make([]float32, p.Rows*p.Cols)}
		for i := range out.Data {
			out.Data[i] = math.Float32frombits(binary.LittleEndian.Uint32(p.Data[4*i:]))
		}
		a.Prediction = &Prediction{Model: p.Model, Version: p.Version, ID: p.ID, InputSchema: p.InputSchema, OutputSchema: p.OutputSchema,
			Outputs: p.Outputs, Out: out}
		if p.Labels != nil {
			if len(p.Labels) != p.Cols {
				return nil, fmt.Errorf("decode saved answer: labels for %d columns of %d", len(p.Labels), p.Cols)
			}
			a.Prediction.Labels = p.Labels
		}
		if p.FeatureFields != nil {
			f := &Enriched{Fields: p.FeatureFields, Origins: make([][]features.Origin, len(p.FeatureOrigins))}
			for i, s := range p.FeatureOrigins {
				if len(s) != len(f.Fields) {
					return nil, fmt.Errorf("decode saved answer: instance %d has %d feature origins for %d fields", i, len(s), len(f.Fields))
				}
				f.Origins[i] = make([]features.Origin, len(s))
				for k := 0; k < len(s); k++ {
					f.Origins[i][k] = features.Origin(s[k] - '0')
				}
			}
			a.Prediction.Features = f
		}
	}
	if e := s.Err; e != nil {
		a.Err = &errs.Error{Code: e.Code, Message: e.Message, Field: e.Field}
	}
	return a, nil
}

// fromStore answers a retry the cache did not know from the answer saved
// with its record, if there is one (done: the call is answered; the
// cache's reservation is completed or aborted). It never computes: an id
// found with other input is a conflict, one found without a kept answer is
// refused, and a store that cannot be asked is 503.
func (g *Gateway) fromStore(ctx context.Context, tn *tenant.Tenant, c Call, key string) (a *Answer, done bool) {
	f, err := g.Saved.Lookup(ctx, tn.Name, c.RequestID, time.Now())
	if err != nil {
		g.Idem.Abort(tn.Name, c.RequestID)
		g.log().Warn("idempotency: records store lookup failed", "request_id", c.RequestID, "tenant", tn.Name, "err", err)
		e := errs.New(errs.Unavailable, "request id %q cannot be checked against the answers kept before the last restart (the records store failed); nothing was computed: retry", c.RequestID)
		e.RetryAfter = time.Second
		return &Answer{RequestID: c.RequestID, Err: e}, true
	}
	if f == nil {
		return nil, false
	}
	if f.Key != key {
		g.Idem.Abort(tn.Name, c.RequestID)
		return g.conflict(c), true
	}
	if f.Answer == nil {
		g.Idem.Abort(tn.Name, c.RequestID)
		return &Answer{RequestID: c.RequestID, Err: errs.Field(errs.IdempotencyConflict, idField(c),
			"request id %q was answered (status %d) but its answer was over %d bytes and not kept for replay after a restart; it is not computed again: use a new id", c.RequestID, f.Status, records.MaxReplayBytes)}, true
	}
	kept, err := decodeAnswer(f.Answer, c.RequestID)
	if err != nil {
		g.Idem.Abort(tn.Name, c.RequestID)
		g.log().Error("idempotency: saved answer unreadable", "request_id", c.RequestID, "tenant", tn.Name, "err", err)
		return &Answer{RequestID: c.RequestID, Err: errs.New(errs.Internal, "the answer kept for request id %q cannot be read; it is not computed again: use a new id", c.RequestID)}, true
	}
	g.Idem.Keep(tn.Name, c.RequestID, records.Response{Status: f.Status, Value: kept})
	return g.replay(ctx, tn, c.RequestID, records.Response{Status: f.Status, Value: kept}, f.Row), true
}

// conflict is the answer to a request id used with a different request.
func (g *Gateway) conflict(c Call) *Answer {
	return &Answer{RequestID: c.RequestID, Err: errs.Field(errs.IdempotencyConflict, idField(c),
		"request id %q was used with a different request within the idempotency window (%s); use a new id", c.RequestID, g.Idem.Window())}
}

func idField(c Call) string {
	if c.IDField == "" {
		return "X-Request-Id"
	}
	return c.IDField
}
