package main

import (
	"fmt"
	"os"
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
			fmt.Fprint(cmd.OutOrStdout(), string(r.Body))
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().IntVar(&version, "version", 0, "call this version (default: the version that serves the model)")
	cmd.Flags().StringVar(&requestID, "request-id", "", "X-Request-Id to send")
	return cmd
}
