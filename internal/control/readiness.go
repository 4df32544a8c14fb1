package control

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sluiceml/sluice/internal/routing"
)

// servingWarnings says which models of t cannot serve all of their traffic
// as deployed, naming each model, the versions at fault, their share of
// the traffic and why they are not ready. A model with no ready version at
// all says so. The reasons are the versions' load reasons, which carry no
// server paths (registry.StorageError).
func servingWarnings(t *routing.Table) []string {
	var out []string
	for _, name := range t.Names() {
		e := t.Models[name]
		share := map[int]uint32{} // not-ready routed version → its buckets
		var served uint32
		for _, r := range e.Routes {
			if r.Target == nil {
				share[r.Version] += r.Hi - r.Lo
			} else {
				served += r.Hi - r.Lo
			}
		}
		var down []string
		for _, n := range sortedKeys(share) {
			why := e.NotReady[n]
			if why == "" {
				why = "not ready"
			}
			down = append(down, fmt.Sprintf("%s@%d (%s of its traffic) is %s", name, n, percent(share[n]), why))
		}
		switch {
		case len(e.Versions) == 0:
			msg := "model " + name + " has no ready version"
			if len(down) == 0 {
				for _, n := range sortedKeys(e.NotReady) {
					down = append(down, fmt.Sprintf("%s@%d is %s", name, n, e.NotReady[n]))
				}
			}
			if len(down) > 0 {
				msg += ": " + strings.Join(down, "; ")
			}
			out = append(out, msg)
		case len(down) > 0 && served == 0:
			out = append(out, "model "+name+" cannot serve: "+strings.Join(down, "; ")+"; its calls answer 503 not_ready")
		case len(down) > 0:
			out = append(out, "model "+name+" cannot serve its deployment as set: "+strings.Join(down, "; ")+"; the ready versions take that traffic")
		}
	}
	return out
}

func percent(buckets uint32) string {
	return FormatSig(float64(buckets)*100/float64(routing.Buckets), 4) + "%"
}

func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
