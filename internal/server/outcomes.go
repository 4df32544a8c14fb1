package server

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/outcomes"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/tenant"
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

// startExperiment serves PUT /v1/deployments/{model} with "experiment":
// the split A (100 − split) / B (split) by sticky routing key, then the
// experiment stored (its figures from now on).
func (s *Server) startExperiment(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model string, body api.SetTraffic) error {
	if s.cfg.Lab == nil {
		return outcomesOff()
	}
	if len(body.Targets) > 0 {
		return errs.Field(errs.InvalidArgument, "targets", "give targets or experiment, not both: an experiment sets the split itself")
	}
	spec := *body.Experiment
	if err := outcomes.CheckSpec(spec); err != nil {
		return err
	}
	if e, err := s.cfg.Lab.Running(r.Context(), model); err != nil {
		return errs.Wrap(errs.Unavailable, err, "read the experiments")
	} else if e != nil {
		return errs.New(errs.AlreadyExists, "model %s has experiment %d running (%s@%d against %s@%d): stop it first (sluice ab stop %s)", model, e.ID, model, e.Spec.A, model, e.Spec.B, model)
	}
	reason := body.Reason
	if reason == "" {
		reason = "experiment on " + spec.Metric
	}
	ts := []registry.Target{{Version: spec.A, Weight: 100 - spec.Split}, {Version: spec.B, Weight: spec.Split}}
	expect := -1
	if body.ExpectPolicyVersion != nil {
		expect = *body.ExpectPolicyVersion
	}
	if _, err := s.ctl.SetTargets(r.Context(), model, ts, tn.Name, reason, expect); err != nil {
		return err
	}
	ex, err := s.cfg.Lab.Start(r.Context(), model, spec, tn.Name, reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, ex)
	return nil
}

// listExperiments is GET /v1/experiments: every running experiment the
// tenant may read, so a page of them needs one call, not one per model.
func (s *Server) listExperiments(w http.ResponseWriter, r *http.Request) error {
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	if len(r.URL.RawQuery) > 0 {
		return errs.Field(errs.InvalidArgument, "query", "GET /v1/experiments takes no parameters, got %q", errs.Clip(r.URL.RawQuery))
	}
	if s.cfg.Lab == nil {
		return outcomesOff()
	}
	list, err := s.cfg.Lab.List(r.Context(), tn.Allowed)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.ExperimentList{Experiments: list})
	return nil
}

// experiment serves GET /v1/deployments/{model}/experiment[?history=N]
// and POST /v1/deployments/{model}/experiment:stop.
func (s *Server) experiment(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model, action string, need func(string, bool) error) error {
	switch action {
	case "":
		if err := need(http.MethodGet, false); err != nil {
			return err
		}
		if s.cfg.Lab == nil {
			return outcomesOff()
		}
		history := 20
		if h := r.URL.Query().Get("history"); h != "" {
			n, err := strconv.Atoi(h)
			if err != nil || n < 0 || n > outcomes.MaxHistory {
				return errs.Field(errs.InvalidArgument, "history", "must be 0 to %d refreshes, got %q", outcomes.MaxHistory, errs.Clip(h))
			}
			history = n
		}
		ex, err := s.cfg.Lab.Status(r.Context(), model, history)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, ex)
		return nil
	case "stop":
		if err := need(http.MethodPost, true); err != nil {
			return err
		}
		if s.cfg.Lab == nil {
			return outcomesOff()
		}
		ex, err := s.cfg.Lab.Stop(r.Context(), model)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, ex)
		return nil
	}
	return errs.New(errs.NotFound, "no route for %s %s: an experiment is GET /v1/deployments/{model}/experiment or POST …/experiment:stop (see docs/api.md)", r.Method, errs.Clip(r.URL.Path))
}
