package jobs

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestOperationsDocListsJobMetrics: every metric family the runner
// registers is documented in docs/operations.md (telemetry's test of the
// doc checks the families telemetry registers, and leaves these to this
// one).
func TestOperationsDocListsJobMetrics(t *testing.T) {
	raw, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	m.rows.WithLabelValues("j", "ok").Inc()
	m.chunk.Observe(1)
	m.rps.WithLabelValues("j").Set(1)
	reg.MustRegister(newStatesCollector(newMemStore()))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
	}
	for _, n := range []string{"sluice_job_rows_total", "sluice_job_chunk_seconds", "sluice_job_rows_per_second", "sluice_jobs"} {
		if !names[n] {
			t.Errorf("the runner does not register %s (this test's list is stale)", n)
		}
	}
	for n := range names {
		if !strings.Contains(string(raw), "`"+n+"`") {
			t.Errorf("docs/operations.md does not document %s", n)
		}
	}
}
