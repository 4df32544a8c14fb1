package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/api"
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

// TestListDeployments: GET /v1/deployments answers every deployment the
// tenant may read, by model name, each as GET /v1/deployments/{model}
// answers it; it takes no parameters.
func TestListDeployments(t *testing.T) {
	set, acme, _, root := routeTenants(t)
	ts, _, _ := newTestServerAll(t, Config{Tenants: set}, examples.FS)
	get := func(path, key string) (int, []byte) {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	names := func(key string) []string {
		st, b := get("/v1/deployments", key)
		if st != 200 {
			t.Fatalf("GET /v1/deployments: %d %s", st, b)
		}
		var l api.DeploymentList
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range l.Deployments {
			_, one := get("/v1/deployments/"+d.Model, key)
			var want api.Deployment
			json.Unmarshal(one, &want)
			if want.PolicyVersion != d.PolicyVersion || len(want.Targets) != len(d.Targets) {
				t.Errorf("%s in the list %+v, alone %+v", d.Model, d, want)
			}
			out = append(out, d.Model)
		}
		return out
	}
	if got := strings.Join(names(root), ","); got != "churn,fraud,iris" {
		t.Errorf("root sees %s, want churn,fraud,iris", got)
	}
	if got := strings.Join(names(acme), ","); got != "fraud,iris" {
		t.Errorf("acme (fraud, iris*) sees %s, want fraud,iris", got)
	}
	if st, b := get("/v1/deployments?limit=3", root); st != 400 || !strings.Contains(string(b), "takes no parameters") {
		t.Errorf("with a parameter: %d %s", st, b)
	}
}
