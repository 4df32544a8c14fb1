package server

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/tenant"
	"github.com/sluiceml/sluice/internal/vstats"
)

// deployments routes /v1/deployments/{model}[...].
func (s *Server) deployments(w http.ResponseWriter, r *http.Request) error {
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	rest := strings.TrimPrefix(r.URL.Path, "/v1/deployments/")
	model, sub, _ := strings.Cut(rest, "/")
	model, verb, _ := strings.Cut(model, ":")
	if model == "" {
		return errs.New(errs.NotFound, "no route for %s %s (see docs/api.md)", r.Method, errs.Clip(r.URL.Path))
	}
	if err := checkModelName(model); err != nil {
		return err
	}
	if err := tn.Check(model); err != nil {
		return err
	}
	need := func(method string, admin bool) error {
		if r.Method != method {
			w.Header().Set("Allow", method)
			return errs.New(errs.MethodNotAllowed, "%s %s is not allowed; use %s", r.Method, r.URL.Path, method)
		}
		if admin && !tn.Admin {
			return errs.New(errs.PermissionDenied, "tenant %q may not change deployments (needs admin: true in the tenants file)", tn.Name)
		}
		return nil
	}
	switch {
	case sub == "" && verb == "" && r.Method == http.MethodGet:
		return s.getDeployment(w, model)
	case sub == "" && verb == "":
		if err := need(http.MethodPut, true); err != nil {
			return err
		}
		return s.putDeployment(w, r, tn, model)
	case sub == "" && verb == "rollback":
		if err := need(http.MethodPost, true); err != nil {
			return err
		}
		var body api.RolloutAction
		if err := decodeJSON(w, r, &body); err != nil {
			return err
		}
		if body.To < 0 {
			return errs.Field(errs.InvalidArgument, "to", "must be a version number (1, 2, …), or absent for the previous version; got %d", body.To)
		}
		if err := checkReason(body.Reason); err != nil {
			return err
		}
		if _, err := s.ctl.Rollback(r.Context(), model, body.To, tn.Name, body.Reason); err != nil {
			return err
		}
		return s.getDeployment(w, model)
	case sub == "experiment" || strings.HasPrefix(sub, "experiment:"):
		return s.experiment(w, r, tn, model, strings.TrimPrefix(strings.TrimPrefix(sub, "experiment"), ":"), need)
	case sub == "history" && verb == "":
		if err := need(http.MethodGet, false); err != nil {
			return err
		}
		return s.history(w, r, model)
	case sub == "rollout" || strings.HasPrefix(sub, "rollout:"):
		action := strings.TrimPrefix(strings.TrimPrefix(sub, "rollout"), ":")
		switch {
		case action == "" && r.Method == http.MethodGet:
			ro := s.ctl.RolloutStatus(model)
			if ro == nil {
				return errs.New(errs.NotFound, "model %s has no rollout", model)
			}
			writeJSON(w, http.StatusOK, rolloutJSON(ro))
			return nil
		case action == "":
			if err := need(http.MethodPost, true); err != nil {
				return err
			}
			return s.startRollout(w, r, tn, model)
		default:
			if err := need(http.MethodPost, true); err != nil {
				return err
			}
			var body api.RolloutAction
			if err := decodeJSON(w, r, &body); err != nil {
				return err
			}
			if body.To != 0 {
				return errs.Field(errs.InvalidArgument, "to", "only a rollback takes a version")
			}
			if err := checkReason(body.Reason); err != nil {
				return err
			}
			ro, err := s.ctl.Act(r.Context(), model, action, tn.Name, body.Reason)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, rolloutJSON(ro))
			return nil
		}
	}
	return errs.New(errs.NotFound, "no route for %s %s (see docs/api.md)", r.Method, errs.Clip(r.URL.Path))
}

func (s *Server) stateOf(model string, n int) string {
	if st, ok := s.status(model, n); ok {
		return string(st.State)
	}
	return "unknown"
}

func targetsJSON(model string, ts []registry.Target, state func(string, int) string) []api.Target {
	out := make([]api.Target, len(ts))
	for i, t := range ts {
		out[i] = api.Target{Version: t.Version, ID: model + "@" + itoa(t.Version), Weight: t.Weight, Shadow: t.Shadow}
		if state != nil {
			out[i].State = state(model, t.Version)
		}
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

func (s *Server) getDeployment(w http.ResponseWriter, model string) error {
	d, err := s.deploymentJSON(model, s.stateOf)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// listDeployments is GET /v1/deployments: every deployment the tenant
// may read, by model name (models with no deployment yet are left out),
// so a page of many models needs one call, not one per model.
func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request) error {
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	if len(r.URL.RawQuery) > 0 {
		return errs.Field(errs.InvalidArgument, "query", "GET /v1/deployments takes no parameters, got %q", errs.Clip(r.URL.RawQuery))
	}
	// Every version's state from one read (stateOf reads them all for
	// each target: 500 models would read them 500 times).
	type key struct {
		model string
		n     int
	}
	states := map[key]string{}
	for _, st := range s.ctl.Versions() {
		states[key{st.Version.Model, st.Version.N}] = string(st.State)
	}
	state := func(model string, n int) string {
		if st, ok := states[key{model, n}]; ok {
			return st
		}
		return "unknown"
	}
	out := api.DeploymentList{Deployments: []api.Deployment{}}
	for _, m := range s.modelsJSON() {
		if !tn.Allowed(m.Name) {
			continue
		}
		if d, err := s.deploymentJSON(m.Name, state); err == nil {
			out.Deployments = append(out.Deployments, d)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deploymentJSON is the model's deployment as GET /v1/deployments/{model}
// answers it; state gives a target's load state.
func (s *Server) deploymentJSON(model string, state func(string, int) string) (api.Deployment, error) {
	p, ok := s.ctl.Policy(model)
	if !ok {
		if _, known := s.ctl.Table.Load().Models[model]; !known {
			return api.Deployment{}, errs.New(errs.NotFound, "model %q not found", model)
		}
		return api.Deployment{}, errs.New(errs.NotFound, "model %s has no deployment yet (its first ready version gets one)", model)
	}
	d := api.Deployment{Model: model, PolicyVersion: p.Version, Targets: targetsJSON(model, p.Targets, state),
		UpdatedAt: p.CreatedAt, Actor: p.Actor, Reason: p.Reason, Diff: p.Diff}
	if ro := s.ctl.RolloutStatus(model); ro != nil {
		j := rolloutJSON(ro)
		d.Rollout = &j
	}
	shadowed := map[int]bool{}
	for _, t := range p.Targets {
		if t.Shadow {
			shadowed[t.Version] = true
		}
	}
	if ro := d.Rollout; ro != nil && ro.Candidate > 0 && (ro.Phase == "shadow" || ro.Phase == "canary" || ro.Phase == "paused") {
		shadowed[ro.Candidate] = true // its shadow figures feed the rollout's gates
	}
	var vs []int
	for v := range shadowed {
		vs = append(vs, v)
	}
	sort.Ints(vs)
	for _, v := range vs {
		if rep := shadowReport(v, s.ctl.ShadowFigures(model, v)); rep.Requests+rep.Dropped > 0 {
			d.Shadows = append(d.Shadows, rep)
		}
	}
	return d, nil
}

func shadowReport(v int, sn vstats.Snapshot) api.ShadowReport {
	sh := sn.Shadow
	rep := api.ShadowReport{Version: v, Requests: sh.Requests, Rows: sh.Rows, Disagreements: sh.Disagreements,
		MaxAbsDiff: sh.AbsDiffMax, Errors: sh.Errors, Dropped: sh.Dropped, Incompatible: sh.Incompatible,
		P50Ms: ms(sh.Latency.Quantile(0.5)), P99Ms: ms(sh.Latency.Quantile(0.99))}
	if sh.Rows > 0 {
		rep.DisagreementRate = float64(sh.Disagreements) / float64(sh.Rows)
	}
	if sh.Values > 0 {
		rep.MeanAbsDiff = sh.AbsDiffSum / float64(sh.Values) // over every compared output value
	}
	return rep
}

func (s *Server) putDeployment(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model string) error {
	var body api.SetTraffic
	if err := decodeJSON(w, r, &body); err != nil {
		return err
	}
	if err := checkReason(body.Reason); err != nil {
		return err
	}
	if body.Experiment != nil {
		return s.startExperiment(w, r, tn, model, body)
	}
	ts := make([]registry.Target, len(body.Targets))
	for i, t := range body.Targets {
		ts[i] = registry.Target{Version: t.Version, Weight: t.Weight, Shadow: t.Shadow}
	}
	expect := -1
	if body.ExpectPolicyVersion != nil {
		expect = *body.ExpectPolicyVersion
	}
	if _, err := s.ctl.SetTargets(r.Context(), model, ts, tn.Name, body.Reason, expect); err != nil {
		return err
	}
	return s.getDeployment(w, model)
}

func (s *Server) history(w http.ResponseWriter, r *http.Request, model string) error {
	if at := r.URL.Query().Get("at"); at != "" {
		t, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			return errs.Field(errs.InvalidArgument, "at", "must be an RFC 3339 time like 2026-11-30T07:40:00Z, got %q", errs.Clip(at))
		}
		p, err := s.ctl.PolicyAt(r.Context(), model, t)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, policyJSON(p))
		return nil
	}
	limit, err := pageLimit(r, defaultPage, maxHistoryPage)
	if err != nil {
		return err
	}
	afterPolicy, afterEvent, _, err := decodeCursor(r, "history")
	if err != nil {
		return err
	}
	// One more of each than asked says whether another page follows.
	ps, es, err := s.ctl.HistoryPage(r.Context(), model, int(afterPolicy), afterEvent, limit+1)
	if err != nil {
		return err
	}
	more := len(ps) > limit || len(es) > limit
	ps, es = ps[:min(len(ps), limit)], es[:min(len(es), limit)]
	h := api.History{Model: model, Policies: []api.Policy{}, Events: []api.Event{}}
	for _, p := range ps {
		h.Policies = append(h.Policies, policyJSON(p))
		afterPolicy = int64(p.Version)
	}
	for _, e := range es {
		h.Events = append(h.Events, api.Event{At: e.At, Actor: e.Actor, Action: e.Action, What: e.What, Reason: e.Reason})
		afterEvent = e.Seq
	}
	if more {
		h.NextCursor = encodeCursor("history", afterPolicy, afterEvent)
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

func policyJSON(p registry.Policy) api.Policy {
	return api.Policy{PolicyVersion: p.Version, Targets: targetsJSON(p.Model, p.Targets, nil), CreatedAt: p.CreatedAt, Actor: p.Actor, Reason: p.Reason, Diff: p.Diff}
}

func (s *Server) startRollout(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model string) error {
	var body api.StartRollout
	if err := decodeJSON(w, r, &body); err != nil {
		return err
	}
	if err := checkReason(body.Reason); err != nil {
		return err
	}
	if body.Version <= 0 {
		return errs.Field(errs.InvalidArgument, "version", "is required: the version to roll out")
	}
	var plan *modelpkg.Release
	if len(body.Plan) > 0 && string(body.Plan) != "null" {
		plan = &modelpkg.Release{}
		if err := decodeControl(body.Plan, "plan", plan); err != nil {
			e := errs.As(err)
			e.Message += " (see docs/releases.md)"
			return e
		}
	}
	ro, err := s.ctl.Deploy(r.Context(), model, body.Version, plan, tn.Name, body.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, rolloutJSON(ro))
	return nil
}

func rolloutJSON(r *control.Rollout) api.Rollout {
	plan, _ := json.Marshal(r.Plan)
	out := api.Rollout{Model: r.Model, Candidate: r.Candidate, Baseline: r.Baseline, Phase: string(r.Phase), Step: r.Step + 1,
		Steps: r.Plan.Steps, StepStart: r.StepStart, Reason: r.Reason, Started: r.Started, Actor: r.Actor, Plan: plan}
	if r.Step < len(r.Plan.Steps) {
		out.Percent = r.Plan.Steps[r.Step]
	}
	switch r.Phase {
	case control.PhaseCanary:
		if left := r.Plan.Bake.Duration - time.Since(r.StepStart); left > 0 {
			out.NextStepInMs = ms(left)
		}
	case control.PhaseShadow, control.PhaseWaiting:
		out.Percent = 0
	}
	for _, g := range r.Gates {
		out.Gates = append(out.Gates, api.Gate{Name: g.Name, Observed: g.Observed, Limit: g.Limit, Samples: g.Samples, Ready: g.Ready, Pass: g.Pass})
	}
	return out
}
