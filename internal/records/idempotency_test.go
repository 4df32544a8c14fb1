package records

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestIdempotencyByteBound: the cache holds at most maxBytes of answers,
// counting each answer's Size and body; the oldest answers go first, and
// an answer larger than the whole bound is not kept (its waiter is told to
// compute again).
func TestIdempotencyByteBound(t *testing.T) {
	const kb = 1 << 10
	c := NewIdempotency(time.Minute, 1000, 10*kb)
	keep := func(id string, size int) {
		t.Helper()
		if o := c.Begin("t", id, "h"); o.Kind != New {
			t.Fatalf("%s: begin %v", id, o.Kind)
		}
		c.Keep("t", id, Response{Status: http.StatusOK, Value: id, Size: size})
	}
	for i := 0; i < 10; i++ {
		keep(fmt.Sprint("a", i), 2*kb)
		if b := c.Bytes(); b > 10*kb {
			t.Fatalf("after %d answers: %d bytes held, bound %d", i+1, b, 10*kb)
		}
	}
	// 2 KiB answers plus their bookkeeping: four fit in 10 KiB.
	if n := c.Len(); n != 4 {
		t.Fatalf("%d ids kept, want 4", n)
	}
	for i := 0; i < 10; i++ {
		id := fmt.Sprint("a", i)
		o := c.Begin("t", id, "h")
		want := New
		if i >= 6 {
			want = Replay
		}
		if o.Kind != want {
			t.Errorf("%s: %v, want %v (the oldest go first)", id, o.Kind, want)
		}
		if o.Kind == New {
			c.Abort("t", id)
		}
	}

	// Too large for the whole bound: not kept, and a concurrent duplicate
	// is told to compute itself.
	if o := c.Begin("t", "big", "h"); o.Kind != New {
		t.Fatal(o.Kind)
	}
	dup := c.Begin("t", "big", "h")
	if dup.Kind != InFlight {
		t.Fatal(dup.Kind)
	}
	before := c.Bytes()
	c.Keep("t", "big", Response{Status: http.StatusOK, Size: 11 * kb})
	if _, err := dup.Wait(context.Background()); !errors.Is(err, ErrAborted) {
		t.Fatalf("waiter of an answer too large to keep: %v", err)
	}
	if o := c.Begin("t", "big", "h"); o.Kind != New {
		t.Fatalf("retry of an answer too large to keep: %v", o.Kind)
	}
	if c.Bytes() != before {
		t.Fatalf("bytes %d, want %d: an answer not kept evicted others", c.Bytes(), before)
	}
	// Bytes go down as answers expire.
	c.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	c.Abort("t", "big")
	c.Begin("t", "x", "h")
	if c.Bytes() != 0 {
		t.Fatalf("%d bytes held after every answer expired", c.Bytes())
	}
}
