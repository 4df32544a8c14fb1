package app

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder logs what the parts did, in order.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// spec describes a fake part: whether its Start fails, whether it has a
// Run, and whether that Run ends on its own (with runErr) before Stop.
type spec struct {
	name      string
	startErr  error
	run       bool
	runEnds   bool
	runErr    error
	stopErr   error
	ctxStart  bool // Start fails with ctx's error after ctx ends
	cancelled context.CancelFunc
	release   chan struct{} // closed once every part is up: a runEnds Run ends then
}

func (s spec) part(r *recorder) Part {
	p := Part{Name: s.name}
	p.Start = func(ctx context.Context) error {
		if s.ctxStart {
			s.cancelled()
			<-ctx.Done()
			r.add("start " + s.name + " interrupted")
			return ctx.Err()
		}
		if s.startErr != nil {
			r.add("start " + s.name + " failed")
			return s.startErr
		}
		r.add("start " + s.name)
		return nil
	}
	stop := make(chan struct{})
	if s.run {
		p.Run = func() error {
			if s.runEnds {
				<-s.release
			} else {
				<-stop
			}
			r.add("run " + s.name + " returned")
			return s.runErr
		}
	}
	p.Stop = func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			r.add("stop " + s.name + " without a deadline")
		}
		r.add("stop " + s.name)
		if s.run {
			close(stop)
		}
		return s.stopErr
	}
	return p
}

func TestGroup(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		parts   []spec
		cancel  bool // ctx ends once all are up
		want    []string
		wantErr string // "" : nil
	}{
		{
			name:  "all start in order, stop in reverse when ctx ends",
			parts: []spec{{name: "a"}, {name: "b", run: true}, {name: "c"}},
			// b's Run returns after its Stop, before a stops.
			cancel: true,
			want:   []string{"start a", "start b", "start c", "stop c", "stop b", "run b returned", "stop a"},
		},
		{
			name:    "a start that fails stops exactly the parts before it, in reverse",
			parts:   []spec{{name: "a"}, {name: "b", run: true}, {name: "c", startErr: boom}, {name: "d"}},
			want:    []string{"start a", "start b", "start c failed", "stop b", "run b returned", "stop a"},
			wantErr: "boom",
		},
		{
			name:    "the first part failing stops nothing",
			parts:   []spec{{name: "a", startErr: boom}, {name: "b"}},
			want:    []string{"start a failed"},
			wantErr: "boom",
		},
		{
			name:    "a Run that ends with an error stops every part, in reverse",
			parts:   []spec{{name: "a"}, {name: "b", run: true, runEnds: true, runErr: boom}, {name: "c"}},
			want:    []string{"start a", "start b", "start c", "run b returned", "stop c", "stop b", "stop a"},
			wantErr: "boom",
		},
		{
			name:    "a Run that ends without an error stops the process too",
			parts:   []spec{{name: "a", run: true, runEnds: true}, {name: "b"}},
			want:    []string{"start a", "start b", "run a returned", "stop b", "stop a"},
			wantErr: "a: stopped on its own",
		},
		{
			name:    "stop errors are joined, every stop still runs",
			parts:   []spec{{name: "a", stopErr: errors.New("a broke")}, {name: "b", stopErr: errors.New("b broke")}},
			cancel:  true,
			want:    []string{"start a", "start b", "stop b", "stop a"},
			wantErr: "stop b: b broke\nstop a: a broke",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{}
			var g Group
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			release := make(chan struct{})
			for i := range tc.parts {
				tc.parts[i].release = release
			}
			for _, s := range tc.parts {
				g.Add(s.part(r))
			}
			// The last part's Start ends ctx (cancel) or lets the Runs
			// that end on their own end: once every part is up.
			last := &g.parts[len(g.parts)-1]
			start := last.Start
			last.Start = func(c context.Context) error {
				err := start(c)
				if tc.cancel {
					cancel()
				}
				close(release)
				return err
			}
			err := g.Run(ctx, time.Minute)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			if got := r.events(); !slices.Equal(got, tc.want) {
				t.Errorf("events\n %q\nwant\n %q", got, tc.want)
			}
		})
	}
}

// A Start interrupted by ctx (a signal while starting) stops what was
// started and is not an error.
func TestGroupInterruptedWhileStarting(t *testing.T) {
	r := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var g Group
	g.Add(spec{name: "a"}.part(r))
	g.Add(spec{name: "b", ctxStart: true, cancelled: cancel}.part(r))
	g.Add(spec{name: "c"}.part(r))
	if err := g.Run(ctx, time.Minute); err != nil {
		t.Fatalf("Run: %v, want nil", err)
	}
	if got, want := r.events(), []string{"start a", "start b interrupted", "stop a"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// Every Stop shares one deadline: grace after the shutdown began.
func TestGroupStopDeadline(t *testing.T) {
	var deadlines []time.Time
	var g Group
	for range 2 {
		g.Add(Part{Name: "p", Stop: func(ctx context.Context) error {
			d, _ := ctx.Deadline()
			deadlines = append(deadlines, d)
			return nil
		}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := time.Now()
	if err := g.Run(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if len(deadlines) != 2 || !deadlines[0].Equal(deadlines[1]) || deadlines[0].Before(before.Add(time.Hour)) {
		t.Fatalf("deadlines %v: want one, an hour after %v", deadlines, before)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
