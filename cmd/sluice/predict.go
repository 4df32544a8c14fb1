package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

func newPredictCmd() *cobra.Command {
	var server, requestID string
	var version int
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
			r, err := apiClient(cmd, server).PredictRaw(cmd.Context(), args[0], version, body, requestID)
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
	cmd.Flags().StringVar(&requestID, "request-id", "", "X-Request-Id to send")
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
