package server

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluiceml/sluice/internal/errs"
)

// maxLabFile bounds what GET /v1/lab/… reads of a report or its files.
const maxLabFile = 64 << 20

// labFile serves GET /v1/lab/report (the last `sluice lab` report,
// Config.LabReport) and GET /v1/lab/STEM-batching.csv, … STEM.json: the
// files `sluice lab` wrote beside it, which the report links to by
// relative name. Nothing else in that folder is served.
func (s *Server) labFile(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.authenticate(r); err != nil {
		return err
	}
	path := s.cfg.LabReport
	if path == "" {
		return s.noLabReport("(none: --lab-report is empty)")
	}
	name := strings.TrimPrefix(r.URL.Path, "/v1/lab/")
	stem := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	file, ctype := "", ""
	switch {
	case name == "report":
		file, ctype = filepath.Base(path), "text/html; charset=utf-8"
	case name == stem+".json":
		file, ctype = name, "application/json"
	case strings.HasPrefix(name, stem+"-") && strings.HasSuffix(name, ".csv") && labPart(strings.TrimSuffix(strings.TrimPrefix(name, stem+"-"), ".csv")):
		file, ctype = name, "text/csv; charset=utf-8"
	default:
		return errs.New(errs.NotFound, "no lab file %q: GET /v1/lab/report is the last report, and the CSV and JSON files it links to sit beside it", errs.Clip(name))
	}
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return s.noLabReport(path)
	}
	defer root.Close()
	f, err := root.Open(file)
	if err != nil {
		if name == "report" {
			return s.noLabReport(path)
		}
		return errs.New(errs.NotFound, "no lab file %q beside the report %s: run sluice lab again", errs.Clip(name), path)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return s.noLabReport(path)
	}
	if st.Size() > maxLabFile {
		return errs.New(errs.Internal, "the lab file %s is %d bytes, more than the %d this server serves", file, st.Size(), maxLabFile)
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	// The report is self-contained: it needs nothing from anywhere, and
	// gets nothing (no script, no outside request).
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	setWriteDeadline(w, int(st.Size()))
	if r.Method == http.MethodHead {
		return nil
	}
	_, _ = io.Copy(w, io.LimitReader(f, maxLabFile))
	return nil
}

func labPart(p string) bool { return p == "batching" || p == "overload" || p == "many" }

func (s *Server) noLabReport(path string) error {
	return errs.New(errs.NotFound, "no lab report at %s yet: make one with `sluice lab --quick --out report.html --publish DATA_DIR` (this server's --data), or point --lab-report at a report sluice lab wrote (docs/lab.md)", path)
}
