package server

import (
	"net/http"
	"time"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/rollup"
)

// The windows GET /v1/models/{name}/stats accepts.
const (
	minStatsWindow = 5 * time.Minute
	maxStatsWindow = rollup.Keep
)

// statsWindow reads ?window= (default 1h): a whole number of minutes
// from 5m to 24h.
func statsWindow(q string) (time.Duration, error) {
	if q == "" {
		return time.Hour, nil
	}
	d, err := time.ParseDuration(q)
	if err != nil || d < minStatsWindow || d > maxStatsWindow || d%time.Minute != 0 {
		return 0, errs.Field(errs.InvalidArgument, "window", "%q is not a window: a whole number of minutes from 5m to 24h (5m, 1h, 24h)", errs.Clip(q))
	}
	return d, nil
}

// modelStats serves GET /v1/models/{name}/stats: each version's minutes
// of the window ending with the current minute (docs/api.md).
func (s *Server) modelStats(w http.ResponseWriter, r *http.Request, model string, now time.Time) error {
	win, err := statsWindow(r.URL.Query().Get("window"))
	if err != nil {
		return err
	}
	to := now.UTC().Truncate(time.Minute).Add(time.Minute)
	from := to.Add(-win)
	out := api.ModelStats{Model: model, Window: shortDuration(win), Step: "1m", Versions: []api.VersionStats{}}
	known := false
	for _, st := range s.ctl.Versions() {
		if st.Version.Model != model {
			continue
		}
		known = true
		if st.State == registry.Deleted {
			continue
		}
		vs := api.VersionStats{Version: st.Version.ID(), Points: []api.StatPoint{}}
		if v, ok := s.ctl.Stats.Lookup(st.Version.ID()); ok {
			for _, p := range v.Minutes.Points(from, to) {
				vs.Points = append(vs.Points, api.StatPoint{T: p.T, Count: p.Count, Errors: p.Errors, P50Ms: p.P50Ms, P99Ms: p.P99Ms})
			}
		}
		out.Versions = append(out.Versions, vs)
	}
	if !known {
		return errs.New(errs.NotFound, "model %q not found", model)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// shortDuration writes d as "5m", "1h", "1h30m", "24h".
func shortDuration(d time.Duration) string {
	s := d.String() // "1h0m0s", "5m0s"
	for _, suf := range []string{"0s", "0m"} {
		if len(s) > len(suf)+1 && s[len(s)-len(suf):] == suf {
			s = s[:len(s)-len(suf)]
		}
	}
	return s
}
