package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// A Part is one long-running piece of the process. Every field is
// optional.
//
// Start brings the part up and returns once it is up; an error means the
// part is not up (its Stop is not called). Run, when set, is the part's
// body: it runs on its own goroutine once Start returned and ends after
// Stop (a Run that ends earlier, with an error or not, stops the
// process). Stop ends Run and undoes Start; the group then waits for Run
// to return. ctx bounds Stop: the grace of the whole shutdown.
type Part struct {
	Name  string
	Start func(ctx context.Context) error
	Run   func() error
	Stop  func(ctx context.Context) error
}

// Group starts parts in the order they were added and stops them in the
// reverse order, each stop done before the next begins. It is the shape
// of github.com/oklog/run (actors with run and interrupt) with one
// difference that is why it is not that package: run.Group starts every
// actor at once and interrupts them all together, while a process needs
// its stores up before the controller and its listeners last, and its
// listeners stopped and queues drained before the stores close.
type Group struct {
	Log   *slog.Logger // nil: no log
	parts []Part
}

// Add appends p: it starts after every part added before it and stops
// before them.
func (g *Group) Add(p Part) { g.parts = append(g.parts, p) }

// Names lists the parts in start order.
func (g *Group) Names() []string {
	out := make([]string, len(g.parts))
	for i, p := range g.parts {
		out[i] = p.Name
	}
	return out
}

// ErrStopped is the error of a run ended by a part's Run that returned
// nil before its Stop: the part ended on its own.
var ErrStopped = errors.New("stopped on its own")

// Run starts the parts in order. When one fails to start, the parts
// started before it are stopped, in reverse order, and its error is
// returned. Once all are up, Run waits until ctx ends or a part's Run
// returns, then stops every part in reverse order, giving each Stop a
// context that ends grace after the shutdown began. It returns the error
// of the part that ended the run (nil when ctx did), joined with the
// errors of the stops. A start that fails because ctx ended (the process
// was told to stop while starting) returns nil.
func (g *Group) Run(ctx context.Context, grace time.Duration) error {
	type ended struct {
		i   int
		err error
	}
	endc := make(chan ended, len(g.parts)) // one per part at most: never blocks
	running := make([]chan error, len(g.parts))
	started, early := 0, -1 // early: the part whose Run ended the run
	var cause error
	earlyEnd := func(e ended) {
		early, cause = e.i, e.err // a part's error says what failed, as a start's does
		if cause == nil {
			cause = fmt.Errorf("%s: %w", g.parts[e.i].Name, ErrStopped)
		}
	}
start:
	for i, p := range g.parts {
		select {
		case e := <-endc: // a part started before failed meanwhile
			earlyEnd(e)
			break start
		default:
		}
		if p.Start != nil {
			if err := p.Start(ctx); err != nil {
				if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
					cause = err
				} else {
					g.logInfo("interrupted while starting: stopping what was started", "part", p.Name)
				}
				break
			}
		}
		if p.Run != nil {
			done := make(chan error, 1)
			running[i] = done
			go func() {
				err := p.Run()
				done <- err
				endc <- ended{i, err}
			}()
		}
		started = i + 1
	}
	if started == len(g.parts) && cause == nil {
		select {
		case <-ctx.Done():
		case e := <-endc:
			earlyEnd(e)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	errList := []error{cause}
	for i := started - 1; i >= 0; i-- {
		p := g.parts[i]
		if p.Stop != nil {
			if err := p.Stop(sctx); err != nil {
				errList = append(errList, fmt.Errorf("stop %s: %w", p.Name, err))
			}
		}
		if running[i] != nil {
			if err := <-running[i]; err != nil && i != early {
				errList = append(errList, fmt.Errorf("%s: %w", p.Name, err))
			}
		}
	}
	return errors.Join(errList...)
}

func (g *Group) logInfo(msg string, args ...any) {
	if g.Log != nil {
		g.Log.Info(msg, args...)
	}
}
