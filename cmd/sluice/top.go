package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/client"
	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/top"
)

func newTopCmd() *cobra.Command {
	var (
		server   string
		interval time.Duration
		once     bool
		width    int
	)
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Watch a running server: per version req/s, latency, queue, batch fill, refusals, replicas, rollout",
		Long: `top shows a live table of a running server, one line per model version,
refreshed every --interval: requests per second, the share that failed,
p50/p99 latency, queued instances, mean batch fill, refusals per second by
reason, ready and restarting replicas, traffic weight and rollout step.
Rates and quantiles are over the last interval, computed from two scrapes
of the server's /metrics; weights and rollouts come from
/v1/deployments/{model}. --once takes two scrapes one interval apart,
prints one plain table (no screen control codes) and exits.
See docs/operations.md.`,
		Example: `  sluice top
  sluice top --server http://10.0.0.5:8080 --interval 2s
  sluice top --once --interval 5s > now.txt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval <= 0 {
				return fmt.Errorf("--interval must be positive")
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			w := cmd.OutOrStdout()
			screenWidth := func() int {
				if width > 0 || once {
					return width
				}
				if w == io.Writer(os.Stdout) {
					return top.TerminalWidth(os.Stdout.Fd())
				}
				return 0
			}
			t := &topper{c: apiClient(cmd, server), server: server, timeout: interval + 5*time.Second}

			prev, at, err := t.scrape(ctx)
			if err != nil {
				return err
			}
			if !once {
				fmt.Fprint(w, clearScreen+t.title(at, 0)+"\nfirst scrape taken; rates in "+interval.String()+"…\n")
			}
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					if once {
						return ctx.Err()
					}
					fmt.Fprintln(w)
					return nil
				case <-tick.C:
				}
				cur, now, err := t.scrape(ctx)
				if err != nil {
					if ctx.Err() != nil {
						continue // interrupted: the select above ends the loop
					}
					if once {
						return err
					}
					// Keep watching: the server may be restarting.
					fmt.Fprint(w, clearScreen+t.title(now, 0)+"\n"+err.Error()+"\nretrying every "+interval.String()+"…\n")
					continue
				}
				rows := top.Diff(prev, cur, now.Sub(at))
				var b bytes.Buffer
				b.WriteString(t.title(now, now.Sub(at)))
				b.WriteString(top.Summary(rows) + "\n\n")
				if err := top.Render(&b, rows, t.deployments(ctx, rows), screenWidth()); err != nil {
					return err
				}
				if len(rows) == 0 {
					b.WriteString("(no model versions in /metrics)\n")
				}
				if once {
					_, err := w.Write(b.Bytes())
					return err
				}
				fmt.Fprint(w, clearScreen+b.String())
				prev, at = cur, now
			}
		},
	}
	f := cmd.Flags()
	serverFlag(cmd, &server)
	f.DurationVar(&interval, "interval", time.Second, "time between refreshes (with --once, between the two scrapes)")
	f.BoolVar(&once, "once", false, "print one table, without screen control codes, and exit")
	f.IntVar(&width, "width", 0, "cut lines at this many columns (default: the terminal's width; none with --once)")
	return cmd
}

// clearScreen moves the cursor home and clears the screen.
const clearScreen = "\x1b[H\x1b[2J"

// topper fetches what `sluice top` shows from one server.
type topper struct {
	c       *client.Client
	server  string
	timeout time.Duration
}

func (t *topper) title(at time.Time, over time.Duration) string {
	s := fmt.Sprintf("sluice top  %s  %s", t.server, at.Format("2006-01-02 15:04:05"))
	if over > 0 {
		s += fmt.Sprintf("  (rates over %.1fs)", over.Seconds())
	}
	return s + "\n"
}

// scrape reads /metrics and notes when it was answered.
func (t *topper) scrape(ctx context.Context) (top.Snapshot, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	r, err := t.c.Do(ctx, http.MethodGet, "/metrics", http.Header{"Accept": {"text/plain;version=0.0.4"}}, nil)
	now := time.Now()
	if err != nil {
		var ce *client.Error
		if errors.As(err, &ce) && ce.Status == http.StatusNotFound {
			return top.Snapshot{}, now, fmt.Errorf("%s/metrics: 404: this server serves no metrics", t.server)
		}
		return top.Snapshot{}, now, err // the client names the method and URL
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "text/plain") {
		return top.Snapshot{}, now, fmt.Errorf("scrape %s/metrics: unexpected Content-Type %q", t.server, ct)
	}
	s, err := top.Parse(bytes.NewReader(r.Body))
	return s, now, err
}

// deployments fetches the deployment of every model in rows, at the same
// time. A model whose deployment cannot be read shows no weight or rollout.
func (t *topper) deployments(ctx context.Context, rows []top.Row) map[string]api.Deployment {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	models := map[string]bool{}
	for _, r := range rows {
		models[r.Model] = true
	}
	names := make([]string, 0, len(models))
	for m := range models {
		names = append(names, m)
	}
	sort.Strings(names)
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		deps = map[string]api.Deployment{}
	)
	for _, m := range names {
		wg.Go(func() {
			d, err := t.c.Deployment(ctx, m)
			if err != nil || d == nil {
				return
			}
			mu.Lock()
			deps[m] = *d
			mu.Unlock()
		})
	}
	wg.Wait()
	return deps
}
