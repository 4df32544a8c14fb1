package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/client"
)

func newPredictCmd() *cobra.Command {
	var server, requestID string
	var version, attempts int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "predict MODEL JSON|@FILE",
		Short: "Send a predict request (the body: {\"instances\":[…]} or a bare instance object)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := []byte(args[1])
			if p, ok := strings.CutPrefix(args[1], "@"); ok {
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				body = b
			}
			if t := strings.TrimSpace(string(body)); !strings.Contains(t, `"instances"`) && strings.HasPrefix(t, "{") {
				body = []byte(`{"instances":[` + t + `]}`) // a bare instance
			}
			if attempts < 1 {
				return fmt.Errorf("--attempts %d: use 1 (no retry) or more", attempts)
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout %s: use a duration above 0, like 30s", timeout)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			// No id is made up for the retries: only a refusal with
			// Retry-After is retried, and a refusal computed nothing. An
			// id would make every call depend on the records store (an id
			// the gateway does not know is looked up there, and refused
			// with 503 while it is down), which predictions do not.
			c := apiClient(cmd, server)
			c.Retry = client.RetryPolicy{Attempts: attempts, OnRetry: func(n int, err error, wait time.Duration) {
				fmt.Fprintf(cmd.ErrOrStderr(), "sluice: %v; retrying in %s (attempt %d of %d)\n", err, wait, n+1, attempts)
			}}
			r, err := c.PredictRaw(ctx, args[0], version, body, requestID)
			var re *client.RetryError
			if errors.As(err, &re) {
				flag := map[string]string{client.GaveUpAttempts: fmt.Sprintf(" (--attempts %d)", attempts), client.GaveUpDeadline: " (--timeout)"}[re.Reason]
				return fmt.Errorf("%w\n%s%s", re.Err, re.Why, flag)
			}
			if err != nil {
				return err
			}
			if xc := r.Header.Get("X-Cache"); xc != "" {
				// The version has a prediction cache: say what it did, on
				// stderr so that stdout stays the answer's JSON.
				fmt.Fprintf(cmd.ErrOrStderr(), "X-Cache: %s\n", xc)
			}
			printFeatureSources(cmd.ErrOrStderr(), r.Body)
			fmt.Fprint(cmd.OutOrStdout(), string(r.Body))
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().IntVar(&version, "version", 0, "call this version (default: the version that serves the model)")
	cmd.Flags().StringVar(&requestID, "request-id", "", "X-Request-Id to send, the same for every attempt (default: none; the server makes one)")
	cmd.Flags().IntVar(&attempts, "attempts", 3, "calls in all: a refusal with Retry-After (queue_full, quota_exceeded, cold_start, …) is retried after it, while the wait ends within --timeout (1: never retry)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "the whole command's deadline, retries included")
	return cmd
}

// printFeatureSources says, on stderr, where each instance's filled
// features came from (the answer's featureSources: a version with
// features:), one line per instance: "features[0]: declines5m=redis …".
func printFeatureSources(w io.Writer, body []byte) {
	var a struct {
		FeatureSources []map[string]string `json:"featureSources"`
	}
	if json.Unmarshal(body, &a) != nil {
		return
	}
	for i, src := range a.FeatureSources {
		keys := make([]string, 0, len(src))
		for k := range src {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, src[k])
		}
		fmt.Fprintf(w, "features[%d]:%s\n", i, b.String())
	}
}
