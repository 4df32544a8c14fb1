package events

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/sluiceml/sluice/internal/api"
)

func ids(es []Event) []uint64 {
	out := []uint64{}
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func drain(s *Sub) []Event {
	var out []Event
	for {
		select {
		case e, ok := <-s.C():
			if !ok {
				return out
			}
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestReplay(t *testing.T) {
	h := New(Config{Ring: 4, Start: 100})
	for i := range 6 { // 101..106; the ring keeps 103..106
		h.Publish("version", fmt.Sprintf("m%d", i%2), map[string]int{"i": i})
	}
	for _, c := range []struct {
		name  string
		after uint64
		match func(Event) bool
		want  []uint64
		gap   bool
	}{
		{"none asked", 0, nil, []uint64{}, false},
		{"the last one", 106, nil, []uint64{}, false},
		{"inside the ring", 104, nil, []uint64{105, 106}, false},
		{"just before the oldest kept", 102, nil, []uint64{103, 104, 105, 106}, false},
		{"older than the ring", 101, nil, []uint64{}, true},
		{"newer than the last (another process)", 107, nil, []uint64{}, true},
		{"filtered", 102, func(e Event) bool { return e.Model == "m1" }, []uint64{104, 106}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, replay, gap, err := h.Subscribe(c.after, c.match)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := ids(replay); !reflect.DeepEqual(got, c.want) || gap != c.gap {
				t.Errorf("replay %v gap %v, want %v gap %v", got, gap, c.want, c.gap)
			}
		})
	}
}

func TestLiveAfterReplay(t *testing.T) {
	h := New(Config{Start: 1})
	h.Publish("audit", "a", 1) // 2
	s, replay, _, err := h.Subscribe(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Publish("audit", "a", 2) // 3
	if got := append(ids(replay), ids(drain(s))...); !reflect.DeepEqual(got, []uint64{2, 3}) {
		t.Errorf("events %v, want [2 3]: nothing lost or repeated", got)
	}
	if string(replay[0].Data) != "1" || replay[0].Kind != "audit" {
		t.Errorf("event %+v", replay[0])
	}
}

// A subscriber that never reads is dropped once its buffer is full; the
// publisher never waits and the others go on.
func TestSlowSubscriberDropped(t *testing.T) {
	h := New(Config{Buffer: 3})
	slow, _, _, _ := h.Subscribe(0, nil)
	other, _, _, _ := h.Subscribe(0, func(e Event) bool { return e.Model == "b" })
	for range 10 {
		h.Publish("deployment", "a", struct{}{}) // would block here if Publish waited
	}
	h.Publish("deployment", "b", struct{}{})
	if got := len(drain(slow)); got != 3 {
		t.Errorf("slow got %d events, want its buffer's 3", got)
	}
	if !slow.Dropped() {
		t.Error("slow subscriber not dropped")
	}
	if _, ok := <-slow.C(); ok {
		t.Error("dropped subscriber's channel open")
	}
	if got := drain(other); len(got) != 1 || other.Dropped() {
		t.Errorf("other got %d events (dropped %v), want 1", len(got), other.Dropped())
	}
	if h.Streams() != 1 {
		t.Errorf("%d streams, want 1", h.Streams())
	}
}

func TestBounds(t *testing.T) {
	h := New(Config{MaxStreams: 2})
	a, _, _, _ := h.Subscribe(0, nil)
	if _, _, _, err := h.Subscribe(0, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := h.Subscribe(0, nil); !errors.Is(err, ErrTooMany) {
		t.Errorf("third subscriber: %v, want ErrTooMany", err)
	}
	a.Close()
	a.Close() // twice is fine
	b, _, _, err := h.Subscribe(0, nil)
	if err != nil {
		t.Errorf("after a Close: %v", err)
	}
	h.Close()
	if _, ok := <-b.C(); ok || b.Dropped() {
		t.Error("Close left a subscriber open or called it dropped")
	}
	if _, _, _, err := h.Subscribe(0, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if id := h.Publish("worker", "", 1); id != 0 {
		t.Errorf("Publish after Close numbered %d", id)
	}
}

func TestDiffWorkers(t *testing.T) {
	w := func(s string) Worker { return Worker{State: s} }
	for _, c := range []struct {
		name      string
		prev, cur map[string]Worker
		want      []api.EventWorker
	}{
		{"nothing", nil, nil, nil},
		{"joined", nil, map[string]Worker{"w2": w("ready"), "w1": {State: "down", Reason: "starting"}},
			[]api.EventWorker{{Worker: "w1", State: "down", Reason: "starting"}, {Worker: "w2", State: "ready"}}},
		{"same state again", map[string]Worker{"w1": w("ready")}, map[string]Worker{"w1": {State: "ready", Reason: "x"}}, nil},
		{"down", map[string]Worker{"w1": w("ready")}, map[string]Worker{"w1": w("down")}, []api.EventWorker{{Worker: "w1", State: "down"}}},
		{"gone", map[string]Worker{"w1": w("ready"), "w2": w("ready")}, map[string]Worker{"w2": w("ready")}, []api.EventWorker{{Worker: "w1", State: "gone"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := DiffWorkers(c.prev, c.cur); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
