package server

import (
	"context"
	"net/http"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/tenant"
)

// changeBody reads the optional {"reason": …} body of archive, load and
// delete calls; an empty body has no reason.
func changeBody(w http.ResponseWriter, r *http.Request) (api.Change, error) {
	var c api.Change
	if r.ContentLength == 0 {
		return c, nil
	}
	err := decodeJSON(w, r, &c)
	return c, err
}

func needAdmin(tn *tenant.Tenant, what string) error {
	if !tn.Admin {
		return errs.New(errs.PermissionDenied, "tenant %q may not %s (needs admin: true in the tenants file)", tn.Name, what)
	}
	return nil
}

// versionAction serves POST /v1/models/{name}/versions/{n}:archive and
// :load.
func (s *Server) versionAction(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model string, n int, action string) error {
	if err := needAdmin(tn, action+" versions"); err != nil {
		return err
	}
	var wait time.Duration
	if q := r.URL.Query().Get("wait"); q != "" && action == "load" {
		d, err := time.ParseDuration(q)
		if err != nil || d < 0 || d > 10*time.Minute {
			return errs.Field(errs.InvalidArgument, "wait", "must be a duration between 0 and 10m, like \"30s\"")
		}
		wait = d
	}
	body, err := changeBody(w, r)
	if err != nil {
		return err
	}
	switch action {
	case "archive":
		if _, err := s.ctl.Archive(r.Context(), model, n, tn.Name, body.Reason); err != nil {
			return err
		}
	case "load":
		if _, err := s.ctl.Load(r.Context(), model, n, tn.Name, body.Reason); err != nil {
			return err
		}
		if wait > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), wait)
			s.ctl.Wait(ctx, model, n)
			cancel()
		}
	}
	return s.getVersion(w, r, model, n)
}

// deleteVersion serves DELETE /v1/models/{name}/versions/{n}: a version
// that never served.
func (s *Server) deleteVersion(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model string, n int) error {
	if err := needAdmin(tn, "delete versions"); err != nil {
		return err
	}
	body, err := changeBody(w, r)
	if err != nil {
		return err
	}
	if _, err := s.ctl.DeleteVersion(r.Context(), model, n, tn.Name, body.Reason); err != nil {
		return err
	}
	return s.getVersion(w, r, model, n)
}

// deleteModel serves DELETE /v1/models/{name}.
func (s *Server) deleteModel(w http.ResponseWriter, r *http.Request, tn *tenant.Tenant, model string) error {
	if err := needAdmin(tn, "delete models"); err != nil {
		return err
	}
	body, err := changeBody(w, r)
	if err != nil {
		return err
	}
	ns, err := s.ctl.DeleteModel(r.Context(), model, tn.Name, body.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.DeletedModel{Model: model, Versions: ns})
	return nil
}
