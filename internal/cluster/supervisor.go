package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Supervisor starts local worker processes and keeps them running: a
// worker that exits is started again after a backoff (100 ms doubling to
// 10 s; reset once a process has run for a minute). Each process is tied
// to this one (it is killed if this process dies, on Linux) and stopped
// with SIGTERM, then SIGKILL after the grace period, when Run's context ends.
type Supervisor struct {
	Exe    string                   // the sluice binary
	Args   func(id string) []string // the worker's arguments
	IDs    []string                 // one process per id
	Output io.Writer                // where the workers' logs go (default stderr); each line carries worker=<id>
	Logger *slog.Logger
	// OnExit is told when a worker process exits (before it is restarted).
	OnExit func(id, why string)
}

// Run supervises the processes until ctx ends, then stops them within grace.
func (s *Supervisor) Run(ctx context.Context, grace time.Duration) {
	if s.Output == nil {
		s.Output = os.Stderr
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	var wg sync.WaitGroup
	for _, id := range s.IDs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.keep(ctx, id, grace)
		}()
	}
	wg.Wait()
}

func (s *Supervisor) keep(ctx context.Context, id string, grace time.Duration) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		cmd := exec.Command(s.Exe, s.Args(id)...)
		cmd.Stdout, cmd.Stderr = s.Output, s.Output
		cmd.SysProcAttr = sysProcAttr()
		start := time.Now()
		if err := cmd.Start(); err != nil {
			s.Logger.Error("worker did not start", "worker", id, "err", err, "retry_in", backoff.String())
		} else {
			s.Logger.Info("worker started", "worker", id, "pid", cmd.Process.Pid)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-ctx.Done():
				_ = cmd.Process.Signal(syscall.SIGTERM)
				t := time.NewTimer(grace)
				select {
				case <-done:
				case <-t.C:
					_ = cmd.Process.Kill()
					<-done
				}
				t.Stop()
				s.Logger.Info("worker stopped", "worker", id, "pid", cmd.Process.Pid)
				return
			}
			why := exitReason(err)
			s.Logger.Warn("worker exited; restarting", "worker", id, "pid", cmd.Process.Pid, "status", why, "ran", time.Since(start).Round(time.Millisecond).String(), "retry_in", backoff.String())
			if s.OnExit != nil {
				s.OnExit(id, fmt.Sprintf("process %d exited (%s)", cmd.Process.Pid, why))
			}
		}
		if time.Since(start) > time.Minute {
			backoff = 100 * time.Millisecond
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("signal %d: %s", int(ws.Signal()), ws.Signal())
		}
	}
	return err.Error()
}
