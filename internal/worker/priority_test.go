package worker

import (
	"testing"

	"github.com/sluiceml/sluice/internal/hop"
	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/serving"
)

// The class the gateway's hop asks for (cluster.Version sends
// serving.Priority's String) is the class the worker submits at.
func TestPriorityOf(t *testing.T) {
	param := func(s string) map[string]*inferencepb.InferParameter {
		return map[string]*inferencepb.InferParameter{hop.ParamPriority: {ParameterChoice: &inferencepb.InferParameter_StringParam{StringParam: s}}}
	}
	for _, c := range []struct {
		params map[string]*inferencepb.InferParameter
		want   serving.Priority
	}{
		{nil, serving.Online},
		{param(serving.Low.String()), serving.Low},
		{param(serving.BatchJob.String()), serving.BatchJob},
		{param("urgent"), serving.Online},
	} {
		if got := priorityOf(c.params); got != c.want {
			t.Errorf("priorityOf(%v) = %v, want %v", c.params, got, c.want)
		}
	}
}
