package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/tenant"
)

func linearPkg(w string) fstest.MapFS {
	return fstest.MapFS{
		"calc/model.yaml": {Data: []byte("name: calc\nruntime: linear\nartifact: m.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n")},
		"calc/m.json":     {Data: []byte(`{"weights":[[` + w + `]],"bias":[0]}`)},
	}
}

func call(t *testing.T, method, url, body string) (int, []byte, api.ErrorDetail) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb api.ErrorBody
	if resp.StatusCode/100 != 2 {
		_ = json.Unmarshal(b, &eb)
	}
	return resp.StatusCode, b, eb.Error
}

// The archive, load and delete routes: refusals are 409 with the reason,
// an archived version stays listed, a deleted model is gone from listings
// and predict.
func TestArchiveLoadDeleteRoutes(t *testing.T) {
	ts, ctl, _ := newTestServerCtl(t, Config{}, control.Config{}, linearPkg("1")) // DeleteQuiet 0: no check
	if _, err := ctl.PublishFS(context.Background(), linearPkg("2"), ".", "models"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ctl.Wait(ctx, "calc", 2)
	cancel()
	base := ts.URL + "/v1/models/calc"

	if st, _, e := call(t, http.MethodPost, base+"/versions/1:archive", `{"reason":"x"}`); st != 409 || e.Code != "already_exists" || !strings.Contains(e.Message, "calc@1 takes 100% of calc's traffic") {
		t.Fatalf("archive serving version: %d %+v", st, e)
	}
	st, b, e := call(t, http.MethodPost, base+"/versions/2:archive", `{"reason":"superseded"}`)
	var v api.Version
	_ = json.Unmarshal(b, &v)
	if st != 200 || v.State != "archived" || v.Reason != "archived by default: superseded" {
		t.Fatalf("archive calc@2: %d %s %+v", st, b, e)
	}
	_, b, _ = call(t, http.MethodGet, base, "")
	var m api.Model
	_ = json.Unmarshal(b, &m)
	if len(m.Versions) != 2 || m.Versions[1].State != "archived" {
		t.Fatalf("model after archive: %s", b)
	}
	if st, _, e := call(t, http.MethodPost, base+"/versions/2:predict", `{"instances":[{"x":1}]}`); st != 503 || !strings.Contains(e.Message, "archived") {
		t.Fatalf("pinned predict of an archived version: %d %+v", st, e)
	}
	st, b, _ = call(t, http.MethodPost, base+"/versions/2:load?wait=30s", "")
	_ = json.Unmarshal(b, &v)
	if st != 200 || v.State != "ready" {
		t.Fatalf("load calc@2: %d %s", st, b)
	}
	if st, _, e := call(t, http.MethodPost, base+"/versions/2:unload", ""); st != 404 || !strings.Contains(e.Message, ":predict, :archive or :load") {
		t.Fatalf("unknown verb: %d %+v", st, e)
	}
	if st, _, e := call(t, http.MethodPut, base, ""); st != 405 || !strings.Contains(e.Message, "use GET or DELETE") {
		t.Fatalf("PUT model: %d %+v", st, e)
	}

	st, b, _ = call(t, http.MethodDelete, base, `{"reason":"retired"}`)
	var d api.DeletedModel
	_ = json.Unmarshal(b, &d)
	if st != 200 || d.Model != "calc" || len(d.Versions) != 2 {
		t.Fatalf("delete: %d %s", st, b)
	}
	if st, b, _ := call(t, http.MethodGet, ts.URL+"/v1/models", ""); st != 200 || strings.Contains(string(b), `"calc"`) {
		t.Fatalf("list after delete: %d %s", st, b)
	}
	if st, _, _ := call(t, http.MethodGet, base, ""); st != 404 {
		t.Fatalf("GET deleted model: %d", st)
	}
	if st, _, e := call(t, http.MethodPost, base+":predict", `{"instances":[{"x":1}]}`); st != 404 {
		t.Fatalf("predict deleted model: %d %+v", st, e)
	}
	if st, _, _ := call(t, http.MethodDelete, base, ""); st != 404 {
		t.Fatalf("delete twice: %d", st)
	}
}

// A delete inside the quiet window (the server just started: traffic
// before it is unknown) is 409 with the reason; the model stays.
func TestDeleteInsideQuietWindow(t *testing.T) {
	ts, _ := newTestServerFS(t, Config{}, linearPkg("1")) // DefaultDeleteQuiet
	base := ts.URL + "/v1/models/calc"
	if st, _, e := call(t, http.MethodDelete, base, ""); st != 409 || !strings.Contains(e.Message, "without predict calls") {
		t.Fatalf("delete inside the quiet window: %d %+v", st, e)
	}
	if st, _, _ := call(t, http.MethodGet, base, ""); st != 200 {
		t.Fatalf("GET calc after a refused delete: %d", st)
	}
}

// Archive, load and delete need an admin tenant.
func TestArchiveLoadDeleteNeedAdmin(t *testing.T) {
	set, err := tenant.Parse("tenants.yaml", []byte("tenants:\n  - name: app\n    keys: [\"sha256:"+sha256hex("app-key")+"\"]\n    models: [\"*\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := newTestServerFS(t, Config{Tenants: set}, linearPkg("1"))
	for _, c := range []struct{ method, path, want string }{
		{http.MethodPost, "/v1/models/calc/versions/1:archive", `tenant "app" may not archive versions`},
		{http.MethodPost, "/v1/models/calc/versions/1:load", `tenant "app" may not load versions`},
		{http.MethodDelete, "/v1/models/calc", `tenant "app" may not delete models`},
	} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, nil)
		req.Header.Set("Authorization", "Bearer app-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb api.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(eb.Error.Message, c.want) {
			t.Errorf("%s %s: %d %+v", c.method, c.path, resp.StatusCode, eb.Error)
		}
	}
}
