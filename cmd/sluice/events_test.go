package main

import (
	"testing"

	"github.com/sluiceml/sluice/client"
)

func TestEventLine(t *testing.T) {
	for _, c := range []struct {
		e    client.StreamEvent
		want string
	}{
		{client.StreamEvent{ID: "7", Kind: "deployment", Data: []byte(`{"model":"fraud","policy":4,"weights":[{"version":1,"weight":90},{"version":2,"weight":10},{"version":3,"weight":0,"shadow":true}],"actor":"ops","reason":"canary","fromElsewhere":true}`)},
			"7 deployment fraud policy 4: fraud@1 90%, fraud@2 10%, fraud@3 shadow by ops: canary (another gateway)"},
		{client.StreamEvent{ID: "8", Kind: "rollout", Data: []byte(`{"model":"fraud","state":"canary","step":2,"of":4,"percent":25,"candidate":2,"gates":[{"name":"errorRate","observed":0.001,"limit":0.01,"ready":true,"pass":true},{"name":"p99","ready":false}]}`)},
			"8 rollout    fraud@2 canary step 2/4 at 25%; gates: errorRate 0.001/0.01 pass, p99 0/0 waiting"},
		{client.StreamEvent{ID: "9", Kind: "version", Data: []byte(`{"id":"fraud@2","state":"failed","reason":"golden mismatch"}`)}, "9 version    fraud@2 failed: golden mismatch"},
		{client.StreamEvent{ID: "10", Kind: "worker", Data: []byte(`{"worker":"w1","state":"gone"}`)}, "10 worker     worker w1 gone"},
		{client.StreamEvent{ID: "11", Kind: "audit", Data: []byte(`{"model":"fraud","action":"archive","actor":"ops","what":"fraud@1 archived","reason":"old"}`)}, "11 audit      fraud archive by ops: fraud@1 archived (old)"},
		{client.StreamEvent{Kind: "reset", Data: []byte(`{"reason":"read again"}`)}, "- reset      read again"},
		{client.StreamEvent{ID: "12", Kind: "new-kind", Data: []byte(`{"x":1}`)}, `12 new-kind   {"x":1}`},
	} {
		if got := eventLine(c.e); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.e.Kind, got, c.want)
		}
	}
}
