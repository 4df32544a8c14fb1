package server

import (
	"testing"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/serving"
)

// TestPriorityHeader: Sluice-Priority: batch submits the rows at
// serving.BatchJob (the version's batch class counts them), on both /v1
// predict routes; any other value is a 400 naming the header.
func TestPriorityHeader(t *testing.T) {
	ts, ctl := newTestServerFS(t, Config{}, examples.FS)
	body := `{"instances":[{"tenureMonths":3,"supportTickets":4,"plan":"basic"},{"tenureMonths":1,"supportTickets":0,"plan":"pro"}]}`
	served := func() (online, batch int64) {
		for _, v := range ctl.Versions() {
			if v.Version.Model == "churn" && v.Stats != nil && len(v.Stats.Classes) > int(serving.BatchJob) {
				online += v.Stats.Classes[serving.Online].Served
				batch += v.Stats.Classes[serving.BatchJob].Served
			}
		}
		return
	}
	for _, c := range []struct {
		name, path, prio string
		status           int
		online, batch    int64 // rows each class gained
	}{
		{"no header: online", "/v1/models/churn:predict", "", 200, 2, 0},
		{"batch", "/v1/models/churn:predict", "batch", 200, 0, 2},
		{"batch on a version", "/v1/models/churn/versions/1:predict", "batch", 200, 0, 2},
		{"online is no value", "/v1/models/churn:predict", "online", 400, 0, 0},
		{"upper case", "/v1/models/churn:predict", "BATCH", 400, 0, 0},
		{"empty", "/v1/models/churn:predict", " ", 400, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var hdr map[string]string
			if c.prio != "" {
				hdr = map[string]string{"Sluice-Priority": c.prio}
			}
			on0, b0 := served()
			r := send(t, "POST", ts.URL+c.path, body, hdr)
			if r.status != c.status {
				t.Fatalf("got %d (%s), want %d", r.status, r.body, c.status)
			}
			if c.status == 400 && (r.err.Field != "Sluice-Priority" || r.err.Code != "invalid_argument") {
				t.Fatalf("error %+v, want invalid_argument naming Sluice-Priority", r.err)
			}
			on1, b1 := served()
			if on1-on0 != c.online || b1-b0 != c.batch {
				t.Fatalf("online +%d batch +%d, want +%d +%d", on1-on0, b1-b0, c.online, c.batch)
			}
		})
	}
}

// TestOIPPriority: on OIP REST the sluice_priority parameter is the
// Sluice-Priority header's "batch"; Triton's numeric priority is accepted
// and served online.
func TestOIPPriority(t *testing.T) {
	ts, ctl := newTestServerFS(t, Config{}, examples.FS)
	served := func() (online, batch int64) {
		for _, v := range ctl.Versions() {
			if v.Version.Model == "churn" && v.Stats != nil && len(v.Stats.Classes) > int(serving.BatchJob) {
				online += v.Stats.Classes[serving.Online].Served
				batch += v.Stats.Classes[serving.BatchJob].Served
			}
		}
		return
	}
	inputs := `"inputs":[{"name":"tenureMonths","shape":[2],"datatype":"FP32","data":[3,1]},{"name":"supportTickets","shape":[2],"datatype":"INT64","data":[4,0]},{"name":"plan","shape":[2],"datatype":"BYTES","data":["basic","pro"]}]`
	for _, c := range []struct {
		name, params  string
		status        int
		online, batch int64
	}{
		{"none", `{}`, 200, 2, 0},
		{"Triton's priority", `{"priority":1}`, 200, 2, 0},
		{"sluice_priority batch", `{"sluice_priority":"batch"}`, 200, 0, 2},
		{"sluice_priority other", `{"sluice_priority":"online"}`, 400, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			on0, b0 := served()
			r := postOIP(t, ts.URL+"/v2/models/churn/infer", `{"parameters":`+c.params+`,`+inputs+`}`)
			if r.status != c.status {
				t.Fatalf("got %d (%s), want %d", r.status, r.body, c.status)
			}
			on1, b1 := served()
			if on1-on0 != c.online || b1-b0 != c.batch {
				t.Fatalf("online +%d batch +%d, want +%d +%d", on1-on0, b1-b0, c.online, c.batch)
			}
		})
	}
}
