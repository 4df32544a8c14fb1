package connlimit

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/testwait"
)

// A connection past the limit is accepted and closed at once; a closed
// one gives its slot back (once, however often it is closed); the hooks
// see both.
func TestListenerLimit(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var opened, refused atomic.Int64
	ln := New(raw, Config{Max: 2, Opened: func(d int) { opened.Add(int64(d)) }, Refused: func() { refused.Add(1) }})
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	a, b := <-accepted, <-accepted
	// The third is closed by the listener: the client reads EOF.
	_ = clients[2].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := clients[2].Read(make([]byte, 1)); err == nil {
		t.Error("the connection past the limit was not closed")
	}
	if ln.Open() != 2 || opened.Load() != 2 || refused.Load() != 1 {
		t.Errorf("open %d, opened %d, refused %d; want 2, 2, 1", ln.Open(), opened.Load(), refused.Load())
	}
	a.Close()
	a.Close()
	if ln.Open() != 1 || opened.Load() != 1 {
		t.Errorf("after a close: open %d, opened %d; want 1, 1", ln.Open(), opened.Load())
	}
	c, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d := <-accepted
	if ln.Open() != 2 {
		t.Errorf("a new connection after a close: open %d, want 2", ln.Open())
	}
	b.Close()
	d.Close()
}

// A call holds its slot until its context ends; one past the bound is
// refused and counts nothing.
func TestCalls(t *testing.T) {
	c := NewCalls(2)
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	if !c.Take(ctx1) || !c.Take(ctx2) {
		t.Fatal("a call within the bound refused")
	}
	if c.Take(context.Background()) || c.Open() != 2 {
		t.Fatalf("a call past the bound: open %d", c.Open())
	}
	cancel1()
	testwait.Until(t, 10*time.Second, func() bool { return c.Open() == 1 })
	if !c.Take(context.Background()) {
		t.Errorf("after a call ended: open %d, want a slot free", c.Open())
	}
}
