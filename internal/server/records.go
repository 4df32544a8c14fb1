package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/records"
)

// listRecords serves GET /v1/records: a tenant sees its own records, an
// admin tenant everyone's.
func (s *Server) listRecords(w http.ResponseWriter, r *http.Request) error {
	tn, err := s.authenticate(r)
	if err != nil {
		return err
	}
	if s.cfg.RecordStore == nil {
		return errs.New(errs.NotFound, "prediction records are off on this server")
	}
	q := r.URL.Query()
	f := records.Filter{Model: q.Get("model"), Outcome: q.Get("outcome"), RequestID: q.Get("requestId")}
	if !tn.Admin || s.cfg.Tenants == nil {
		f.Tenant = tn.Name
	}
	if s.cfg.Tenants == nil {
		f.Tenant = "" // open mode: one tenant
	}
	if tenantQ := q.Get("tenant"); tenantQ != "" && s.cfg.Tenants != nil {
		if !tn.Admin && tenantQ != tn.Name {
			return errs.Field(errs.PermissionDenied, "tenant", "tenant %q may not read the records of tenant %q (needs admin: true in the tenants file)", tn.Name, tenantQ)
		}
		f.Tenant = tenantQ
	}
	if f.Tenant != tn.Name && !tn.AllModels() {
		// Records of other tenants: only of the caller's models, the rule
		// of ?model= below applied to every row.
		f.Models = tn.Models()
	}
	if f.Model != "" {
		if err := checkModelName(f.Model); err != nil {
			return err
		}
	}
	if f.RequestID != "" && !validRequestID(f.RequestID) {
		return errs.Field(errs.InvalidArgument, "requestId", "must be 1 to 128 printable ASCII characters without spaces")
	}
	if v := q.Get("tenant"); len(v) > 128 {
		return errs.Field(errs.InvalidArgument, "tenant", "must be at most 128 characters")
	}
	if v := q.Get("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return errs.Field(errs.InvalidArgument, "version", "must be a version number, got %q", errs.Clip(v))
		}
		f.Version = n
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return errs.Field(errs.InvalidArgument, "since", "must be an RFC 3339 time, got %q", errs.Clip(v))
		}
		f.Since = t
	}
	limit, err := pageLimit(r, defaultPage, records.MaxLimit)
	if err != nil {
		return err
	}
	if at, row, ok, err := decodeCursor(r, "records"); err != nil {
		return err
	} else if ok {
		f.Before = &records.Position{CreatedAt: time.UnixMicro(at).UTC(), Row: row}
	}
	// One more says whether another page follows; at the store's maximum
	// a full page gets a cursor (whose page may be empty).
	f.Limit = min(limit+1, records.MaxLimit)
	f.MaxBytes = s.maxPageBytes()
	if f.Model != "" {
		if err := tn.CheckControl("read the records of", f.Model); err != nil {
			return err
		}
	}
	rs, err := s.cfg.RecordStore.List(r.Context(), f)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "records store")
	}
	out := api.Records{Records: []api.Record{}}
	var size int64
	for i := range rs {
		size += rs[i].Bytes()
	}
	switch {
	case size > f.MaxBytes && len(rs) > 1 && len(rs) <= limit:
		// The store stopped after the record that took the page past its
		// bytes: the page ends before it, and the cursor goes on from there.
		rs = rs[:len(rs)-1]
		out.LimitedBy = "bytes"
		last := rs[len(rs)-1]
		out.NextCursor = encodeCursor("records", last.CreatedAt.UnixMicro(), last.Row)
	case size > f.MaxBytes && len(rs) == 1:
		out.LimitedBy = "bytes" // one record past the bound alone: it is the page
		out.NextCursor = encodeCursor("records", rs[0].CreatedAt.UnixMicro(), rs[0].Row)
	case len(rs) > limit || (len(rs) == limit && limit == records.MaxLimit):
		rs = rs[:limit]
		last := rs[limit-1]
		out.NextCursor = encodeCursor("records", last.CreatedAt.UnixMicro(), last.Row)
	}
	for _, rc := range rs {
		ar := api.Record{RequestID: rc.RequestID, Tenant: rc.Tenant, Model: rc.Model, Version: rc.Version, LatencyMs: rc.LatencyMs,
			Outcome: rc.Outcome, InputHash: rc.InputHash, CreatedAt: rc.CreatedAt, Attempts: rc.Attempts, Input: rc.Input, Cached: rc.Cached, Features: rc.Features, Outputs: rc.Outputs}
		if rc.Version > 0 {
			ar.ModelVersion = rc.Model + "@" + strconv.Itoa(rc.Version)
		}
		out.Records = append(out.Records, ar)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// maxPageBytes bounds a records page in bytes.
func (s *Server) maxPageBytes() int64 {
	if s.cfg.RecordsPageBytes > 0 {
		return s.cfg.RecordsPageBytes
	}
	return records.MaxPageBytes
}
