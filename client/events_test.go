package client

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestReadEvents(t *testing.T) {
	in := "retry: 1000\n\n: ping\n\nid: 5\nevent: version\ndata: {\"a\":1}\n\nevent: reset\ndata: {\"reason\":\"x\"}\n\ndata: no kind\n\nid: 6\nevent: audit\ndata: line1\ndata: line2\n\nid: 7\nevent: cut"
	var got []StreamEvent
	if err := ReadEvents(strings.NewReader(in), func(e StreamEvent) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []StreamEvent{{ID: "5", Kind: "version", Data: []byte(`{"a":1}`)}, {Kind: "reset", Data: []byte(`{"reason":"x"}`)},
		{ID: "6", Kind: "audit", Data: []byte("line1\nline2")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v (an event without a kind, or not ended by a blank line, is not delivered)", got, want)
	}
	stop := errors.New("stop")
	if err := ReadEvents(strings.NewReader(in), func(StreamEvent) error { return stop }); err != stop {
		t.Errorf("fn's error: %v", err)
	}
}
