package control

import (
	"fmt"
	"testing"

	"github.com/sluiceml/sluice/internal/routing"
)

func TestServingWarnings(t *testing.T) {
	ready := func(n int) *routing.Target {
		return &routing.Target{Model: "fraud", N: n, ID: fmt.Sprintf("fraud@%d", n)}
	}
	missing := "failed: load fraud@2: read artifact sha256:0123456789ab: the artifact is missing from the artifact store; publish its package again"
	entry := func(routes []routing.Route, versions map[int]*routing.Target, notReady map[int]string) *routing.Entry {
		return &routing.Entry{Policy: 1, Routes: routes, Versions: versions, NotReady: notReady}
	}
	route := func(n int, lo, hi uint32, tg *routing.Target) routing.Route {
		return routing.Route{Range: routing.Range{Version: n, Lo: lo, Hi: hi}, Target: tg}
	}
	tests := []struct {
		name  string
		entry *routing.Entry
		want  []string
	}{
		{"all routed versions ready", entry([]routing.Route{route(1, 0, routing.Buckets, ready(1))}, map[int]*routing.Target{1: ready(1)}, map[int]string{2: "failed: golden example 0"}), nil},
		{"the 100% version lost its artifact, an older one is ready",
			entry([]routing.Route{route(2, 0, routing.Buckets, nil)}, map[int]*routing.Target{1: ready(1)}, map[int]string{2: missing}),
			[]string{"model fraud cannot serve: fraud@2 (100% of its traffic) is " + missing + "; its calls answer 503 not_ready"}},
		{"a canary failed",
			entry([]routing.Route{route(1, 0, routing.Buckets*9/10, ready(1)), route(2, routing.Buckets*9/10, routing.Buckets, nil)}, map[int]*routing.Target{1: ready(1)}, map[int]string{2: missing}),
			[]string{"model fraud cannot serve its deployment as set: fraud@2 (10% of its traffic) is " + missing + "; the ready versions take that traffic"}},
		{"no version ready, routed",
			entry([]routing.Route{route(2, 0, routing.Buckets, nil)}, map[int]*routing.Target{}, map[int]string{2: missing}),
			[]string{"model fraud has no ready version: fraud@2 (100% of its traffic) is " + missing}},
		{"no version ready, no deployment yet",
			&routing.Entry{Versions: map[int]*routing.Target{}, NotReady: map[int]string{1: "failed: golden example 0"}},
			[]string{"model fraud has no ready version: fraud@1 is failed: golden example 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := servingWarnings(&routing.Table{Models: map[string]*routing.Entry{"fraud": tc.entry}})
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
