package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/records/recordsdb"
	"github.com/sluiceml/sluice/internal/tenant"
)

// call sends any request and decodes an error body when the status is not 2xx.
func scopedCall(t *testing.T, method, url, ctype, body string, hdr map[string]string) result {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := result{status: resp.StatusCode, header: resp.Header, body: b}
	if resp.StatusCode >= 300 {
		var eb api.ErrorBody
		if err := json.Unmarshal(b, &eb); err != nil {
			t.Fatalf("error body is not JSON: %q", b)
		}
		r.err = eb.Error
	}
	return r
}

// TestControlCallsScopedByTenantModels: an admin tenant acts through the
// control API only on the models its globs match — publish, deployments,
// rollouts, rollback, history and records — and every refusal is 403
// permission_denied naming the model. A publish writes an audit event with
// the tenant as actor.
func TestControlCallsScopedByTenantModels(t *testing.T) {
	file := `tenants:
  - {name: fraudops, keys: ["sha256:` + sha256hex("fraudops-key") + `"], models: ["fraud"], admin: true}
  - {name: ops, keys: ["sha256:` + sha256hex("ops-key") + `"], models: ["*"], admin: true}
  - {name: app, keys: ["sha256:` + sha256hex("app-key") + `"], models: ["fraud", "churn"]}
`
	set, err := tenant.Parse("tenants.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	store, err := recordsdb.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now().UTC()
	if err := store.Insert(context.Background(), []records.Record{
		{RequestID: "ops-fraud", Tenant: "ops", Model: "fraud", Version: 1, Outcome: "ok", CreatedAt: now},
		{RequestID: "ops-churn", Tenant: "ops", Model: "churn", Version: 1, Outcome: "ok", CreatedAt: now},
		{RequestID: "app-churn", Tenant: "app", Model: "churn", Version: 1, Outcome: "ok", CreatedAt: now},
	}); err != nil {
		t.Fatal(err)
	}
	ts, ctl := newTestServerFS(t, Config{Tenants: set, RecordStore: store}, examples.FS)
	pkg := func(dir string) string {
		p, err := modelpkg.ReadDir("../../examples/" + dir)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := p.WriteTarGz(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	churnPkg, fraudPkg := pkg("churn"), pkg("fraud")
	fraudops := map[string]string{"Authorization": "Bearer fraudops-key"}
	const js = "application/json"
	refused := []struct {
		name, method, path, ctype, body string
	}{
		{"publish", "POST", "/v1/models/churn/versions", "application/gzip", churnPkg},
		{"set traffic", "PUT", "/v1/deployments/churn", js, `{"targets":[{"version":1,"weight":100}]}`},
		{"start a rollout", "POST", "/v1/deployments/churn/rollout", js, `{"version":1}`},
		{"pause a rollout", "POST", "/v1/deployments/churn/rollout:pause", js, `{}`},
		{"rollback", "POST", "/v1/deployments/churn:rollback", js, `{"to":1}`},
		{"read the deployment", "GET", "/v1/deployments/churn", "", ""},
		{"read the history", "GET", "/v1/deployments/churn/history", "", ""},
		{"read records by model", "GET", "/v1/records?model=churn", "", ""},
		{"read another tenant's records by model", "GET", "/v1/records?tenant=ops&model=churn", "", ""},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			r := scopedCall(t, c.method, ts.URL+c.path, c.ctype, c.body, fraudops)
			if r.status != 403 || r.err.Code != "permission_denied" || !strings.Contains(r.err.Message, `"churn"`) {
				t.Fatalf("got %d %s %q; want 403 permission_denied naming churn", r.status, r.err.Code, r.err.Message)
			}
		})
	}
	_, events, err := ctl.History(context.Background(), "churn")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Actor == "fraudops" {
			t.Errorf("a refused call left an event: %+v", e)
		}
	}

	t.Run("records of other tenants are only of the caller's models", func(t *testing.T) {
		for _, q := range []string{"tenant=ops", "tenant=app", ""} {
			r := scopedCall(t, "GET", ts.URL+"/v1/records?"+q, "", "", fraudops)
			var rs api.Records
			if err := json.Unmarshal(r.body, &rs); r.status != 200 || err != nil {
				t.Fatalf("?%s: %d %s", q, r.status, r.body)
			}
			for _, rc := range rs.Records {
				if rc.Model != "fraud" {
					t.Errorf("?%s: fraudops read a record of %s: %+v", q, rc.Model, rc)
				}
			}
		}
		r := scopedCall(t, "GET", ts.URL+"/v1/records?tenant=ops", "", "", map[string]string{"Authorization": "Bearer ops-key"})
		if n := strings.Count(string(r.body), `"requestId"`); r.status != 200 || n != 2 {
			t.Errorf("ops reading its own records: %d, %d records: %s", r.status, n, r.body)
		}
	})
	t.Run("a non-admin asking for another tenant's records", func(t *testing.T) {
		r := scopedCall(t, "GET", ts.URL+"/v1/records?tenant=ops", "", "", map[string]string{"Authorization": "Bearer app-key"})
		if r.status != 403 || r.err.Code != "permission_denied" || r.err.Field != "tenant" {
			t.Fatalf("got %d %s %q; want 403 permission_denied on tenant", r.status, r.err.Code, r.err.Message)
		}
	})
	t.Run("publish writes an audit event with the actor", func(t *testing.T) {
		r := scopedCall(t, "POST", ts.URL+"/v1/models/fraud/versions", "application/gzip", fraudPkg, fraudops)
		if r.status != 200 {
			t.Fatalf("publish of an allowed model: %d %s", r.status, r.body)
		}
		r = scopedCall(t, "GET", ts.URL+"/v1/deployments/fraud/history", "", "", fraudops)
		var h api.History
		if err := json.Unmarshal(r.body, &h); err != nil || r.status != 200 {
			t.Fatalf("history: %d %s", r.status, r.body)
		}
		found := false
		for _, e := range h.Events {
			if e.Action == "publish" && e.Actor == "fraudops" && strings.Contains(e.What, "fraud@1") {
				found = true
			}
		}
		if !found {
			t.Errorf("no publish event by fraudops in %+v", h.Events)
		}
	})
}
