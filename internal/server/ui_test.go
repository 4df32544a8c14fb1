package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestConsoleFiles: /ui/ serves the embedded console: each file with its
// type and the CSP that keeps requests on this server, index.html for the
// console's own paths, a 304 on a matching ETag, GET only.
func TestConsoleFiles(t *testing.T) {
	h := consoleHandler()
	get := func(method, path string, hdr ...string) *http.Response {
		req := httptest.NewRequest(method, path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Result()
	}
	body := func(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }
	cases := []struct {
		path, ctype, contains string
	}{
		{"/ui/", "text/html", `<script type="module" src="/ui/app.js">`},
		{"/ui/models/fraud", "text/html", `<script type="module" src="/ui/app.js">`},
		{"/ui/lab", "text/html", `<main`},
		{"/ui/app.js", "text/javascript", "/v1/events"},
		{"/ui/app.css", "text/css", "prefers-color-scheme"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			r := get("GET", c.path)
			if r.StatusCode != 200 {
				t.Fatalf("status %d", r.StatusCode)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, c.ctype) {
				t.Errorf("Content-Type %q, want %s", ct, c.ctype)
			}
			if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("CSP %q", csp)
			}
			if b := body(r); !strings.Contains(b, c.contains) {
				t.Errorf("body lacks %q", c.contains)
			}
			if r2 := get("GET", c.path, "If-None-Match", r.Header.Get("ETag")); r2.StatusCode != http.StatusNotModified {
				t.Errorf("with its ETag: %d, want 304", r2.StatusCode)
			}
		})
	}
	if r := get("GET", "/ui"); r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/ui/" {
		t.Errorf("/ui: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	if r := get("POST", "/ui/"); r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET" {
		t.Errorf("POST /ui/: %d", r.StatusCode)
	}
}
