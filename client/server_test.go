package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/sluiceml/sluice/examples"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/registry"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
	_ "github.com/sluiceml/sluice/internal/runtime/xgboost"
	"github.com/sluiceml/sluice/internal/server"
)

// serverURL is a running Sluice server for the examples, as
// http://127.0.0.1:8080 is after `sluice serve`: TestMain starts the real
// HTTP handler of `sluice serve` (internal/server, the controller, a
// registry in a temporary folder) serving the embedded example models
// (fraud, iris, churn) on 127.0.0.1.
var serverURL string

func TestMain(m *testing.M) {
	stop, err := startServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the examples' server:", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

func startServer() (stop func(), err error) {
	dir, err := os.MkdirTemp("", "sluice-client-")
	if err != nil {
		return nil, err
	}
	store, err := registry.Open(dir)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctl := control.New(control.Config{Store: store, Logger: log, DeleteQuiet: control.DefaultDeleteQuiet})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ctl.Start(ctx); err != nil {
		return nil, err
	}
	if _, err := ctl.PublishFS(ctx, examples.FS, ".", "models"); err != nil {
		return nil, err
	}
	ctl.MarkStarted()
	for _, v := range ctl.Versions() {
		ctl.Wait(ctx, v.Version.Model, v.Version.N)
	}
	if ok, probs, _ := ctl.Readiness(); !ok {
		return nil, fmt.Errorf("examples not ready: %v", probs)
	}
	s := server.New(server.Config{Logger: log}, ctl)
	ts := httptest.NewServer(s.Handler())
	serverURL = ts.URL
	return func() {
		ts.Close()
		s.Close()
		ctl.Close(context.Background())
		store.Close()
		os.RemoveAll(dir)
	}, nil
}
