package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/bench"
)

func newBenchCmd() *cobra.Command {
	var (
		cfg      bench.Config
		payload  string
		sweep    string
		out      string
		asJSON   bool
		arrivals string
	)
	cmd := &cobra.Command{
		Use:   "bench MODEL",
		Short: "Offer open-loop load to a model and report throughput, goodput and corrected latency",
		Long: `bench sends predict requests to MODEL at a fixed offered rate (open loop:
requests go out at their scheduled times whether or not earlier ones were
answered) and reports achieved throughput, goodput and latency measured from
each request's intended send time. Without --payload, instances are generated
from the model's input schema. With --sweep it runs a series of rates and can
chart them (--out chart.svg or chart.html). See docs/bench.md.`,
		Example: `  sluice bench fraud --rate 500 --duration 30s --deadline-ms 50
  sluice bench fraud --arrivals poisson --instances 8 --json
  sluice bench fraud --payload @req.json --sweep 200:2000:200 --duration 10s --out fraud.svg`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Model = args[0]
			cfg.Arrivals = arrivals
			tlsCfg, err := clientTLS(cmd, cfg.Server)
			if err != nil {
				return err
			}
			cfg.TLS = tlsCfg
			if cfg.APIKey == "" {
				cfg.APIKey = os.Getenv("SLUICE_API_KEY")
			}
			if payload != "" {
				b, err := readPayload(payload, cmd.InOrStdin())
				if err != nil {
					return err
				}
				cfg.Payload = b
				if !cmd.Flags().Changed("instances") {
					cfg.InstancesPerRequest = 0
				}
			}
			if out != "" && sweep == "" {
				return fmt.Errorf("--out writes a sweep chart; use it with --sweep")
			}
			stderr := cmd.ErrOrStderr()
			cfg.Warnf = func(format string, args ...any) { fmt.Fprintf(stderr, "warning: "+format+"\n", args...) }

			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			// The first Ctrl-C ends the run early and still prints what was
			// measured; a second one kills the process as usual.
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
			defer stop()
			go func() { <-ctx.Done(); stop() }()

			w := cmd.OutOrStdout()
			if sweep == "" {
				res, err := bench.Run(ctx, cfg)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(w, res)
				}
				return bench.WriteText(w, res)
			}

			rates, err := bench.ParseSweep(sweep)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("rate") {
				return fmt.Errorf("--rate and --sweep do not go together; the sweep sets the rates")
			}
			progress := func(r bench.Result) {
				fmt.Fprintf(stderr, "offered %.1f/s: achieved %.1f/s, goodput %.1f/s, p99 %v\n",
					r.OfferedRate, r.AchievedRate, r.Goodput, r.Latency.P99.Round(10*time.Microsecond))
			}
			fmt.Fprintf(stderr, "sweeping %d rates, %v each (about %v)\n", len(rates), cfg.Duration, time.Duration(len(rates))*cfg.Duration)
			rs, err := bench.RunSweep(ctx, cfg, rates, progress)
			if err != nil {
				return err
			}
			if out != "" {
				if err := writeChart(out, rs, fmt.Sprintf("sluice bench %s (%s arrivals, %v per rate)", cfg.Model, cfg.Arrivals, cfg.Duration)); err != nil {
					return err
				}
				fmt.Fprintf(stderr, "wrote %s\n", out)
			}
			if asJSON {
				return writeJSON(w, rs)
			}
			return bench.WriteSweepText(w, rs)
		},
	}
	f := cmd.Flags()
	serverFlag(cmd, &cfg.Server)
	f.Float64Var(&cfg.Rate, "rate", 100, "offered load, requests per second")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to offer load (per rate, with --sweep)")
	f.StringVar(&arrivals, "arrivals", bench.Constant, "arrival process: constant or poisson")
	f.StringVar(&payload, "payload", "", "request body as JSON, @FILE or @- (stdin); a bare instance object is wrapped in {\"instances\":[…]}; default: generated from the model's schema")
	f.IntVar(&cfg.InstancesPerRequest, "instances", 1, "instances per generated request")
	f.IntVar(&cfg.DeadlineMs, "deadline-ms", 0, "deadlineMs to send, and the bound for goodput (0: none, or the payload's own)")
	f.IntVar(&cfg.Concurrency, "concurrency", bench.DefaultConcurrency, "most requests in flight; arrivals beyond it are dropped and counted")
	f.IntVar(&cfg.Connections, "connections", 0, "most TCP connections (0: one per in-flight request)")
	f.DurationVar(&cfg.Timeout, "timeout", bench.DefaultTimeout, "per-request timeout")
	f.StringVar(&cfg.APIKey, "api-key", "", "API key sent as a bearer token (default: env SLUICE_API_KEY)")
	f.Int64Var(&cfg.Seed, "seed", 1, "seed for poisson gaps and generated payloads")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.StringVar(&sweep, "sweep", "", "run a series of rates START:END:STEP (requests/s), e.g. 200:1000:100")
	f.StringVar(&out, "out", "", "with --sweep, write a chart to this file (.svg, or .html with the table)")
	return cmd
}

// readPayload reads --payload: inline JSON, @FILE or @- for stdin.
func readPayload(arg string, stdin io.Reader) ([]byte, error) {
	body := []byte(arg)
	if p, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if p == "-" {
			body, err = io.ReadAll(io.LimitReader(stdin, 64<<20))
		} else {
			body, err = os.ReadFile(p)
		}
		if err != nil {
			return nil, fmt.Errorf("--payload: %v", err)
		}
	}
	t := strings.TrimSpace(string(body))
	if !json.Valid([]byte(t)) {
		return nil, fmt.Errorf("--payload is not valid JSON")
	}
	if strings.HasPrefix(t, "{") && !strings.Contains(t, `"instances"`) {
		t = `{"instances":[` + t + `]}` // a bare instance, as predict accepts
	}
	return []byte(t), nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeChart(path string, rs []bench.Result, title string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".html", ".htm":
		err = bench.WriteSweepHTML(f, rs, title)
	default:
		err = bench.WriteSweepSVG(f, rs, title)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
