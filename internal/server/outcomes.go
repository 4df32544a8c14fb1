package server

import (
	"errors"
	"io"
	"net/http"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/outcomes"
)

// outcomesOff is the answer of the outcome routes on a server without an
// outcome store.
func outcomesOff() error {
	return errs.New(errs.OutcomesOff, "this server keeps no outcomes (no outcome store); start it with --data or --store (docs/experiments.md)")
}

// postOutcomes serves POST /v1/outcomes: a batch of outcomes, each joined
// to its prediction; the caller must be allowed on the prediction's model
// (else the outcome counts as unknown: no model's existence is told).
func (s *Server) postOutcomes(w http.ResponseWriter, r *http.Request) error {
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return errs.New(errs.MethodNotAllowed, "%s %s is not allowed; use POST", r.Method, r.URL.Path)
	}
	if s.cfg.Outcomes == nil {
		return outcomesOff()
	}
	if !isJSON(r.Header.Get("Content-Type")) {
		return errs.New(errs.UnsupportedMedia, "Content-Type must be application/json, got %q", errs.Clip(r.Header.Get("Content-Type")))
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, outcomes.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errs.New(errs.PayloadTooLarge, "body exceeds %d MiB: post at most %d outcomes per batch", outcomes.MaxBodyBytes>>20, outcomes.MaxBatch)
		}
		return errs.Wrap(errs.InvalidArgument, err, "read request body")
	}
	var batch api.OutcomeBatch
	if err := decodeControl(b, "", &batch); err != nil {
		return err
	}
	ps := make([]outcomes.Posted, len(batch.Outcomes))
	for i, o := range batch.Outcomes {
		if o.Value == nil {
			return errs.Field(errs.InvalidArgument, "outcomes["+itoa(i)+"].value", "is required: a number (1 or 0 for a conversion)")
		}
		ps[i] = outcomes.Posted{RequestID: o.RequestID, Instance: o.Instance, Name: o.Name, Value: *o.Value}
		if o.At != nil {
			ps[i].At = *o.At
		}
	}
	res, err := s.cfg.Outcomes.Post(r.Context(), func(model string) bool { return tn.Check(model) == nil }, ps)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.OutcomeResult{Accepted: res.Accepted, Duplicates: res.Duplicates, Unknown: res.Unknown, UnknownIDs: res.UnknownIDs})
	return nil
}
