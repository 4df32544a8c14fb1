// Command sluice is Sluice's one binary: the server and its CLI. It wires
// packages together and holds no logic of its own.
package main

import (
	"fmt"
	"os"
	goruntime "runtime"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/client"
	_ "github.com/sluiceml/sluice/internal/runtime/linear"
	_ "github.com/sluiceml/sluice/internal/runtime/oip"
	_ "github.com/sluiceml/sluice/internal/runtime/onnx"
	_ "github.com/sluiceml/sluice/internal/runtime/sklearn"
	_ "github.com/sluiceml/sluice/internal/runtime/synthetic"
	_ "github.com/sluiceml/sluice/internal/runtime/xgboost"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Sluice serves machine-learning models under a latency contract",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.AddCommand(newServeCmd(), newCheckCmd(), newPushCmd(), newModelsCmd(), newPredictCmd(), newBenchCmd(), newTenantCmd(),
		newDeployCmd(), newTrafficCmd(), newShadowCmd(), newRolloutCmd(), newRollbackCmd(), newHistoryCmd(), newRecordsCmd(), newTopCmd(), newWorkerCmd(), newWorkersCmd(), newEventsCmd(), newStatsCmd(), newDriftCmd(), newOpenAPICmd(), newVersionCmd(), newInitCmd(), newExportSklearnCmd(),
		newArchiveCmd(), newLoadCmd(), newDeleteCmd(), newPlanCmd(), newControllerCmd(), newJobCmd(), newOutcomesCmd(), newLabCmd(), newABCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(exitCode(err))
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary (as --version does)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "sluice %s (%s, %s/%s)\n", version, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
			return nil
		},
	}
}

// serverFlag registers --server and, beside it, the TLS flags of a
// client (--ca, --cert, --key: clientTLSFlags), checked before the
// command runs so a bad file is reported before any call.
func serverFlag(cmd *cobra.Command, dst *string) {
	def := os.Getenv("SLUICE_SERVER")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	cmd.Flags().StringVar(dst, "server", def, "Sluice server URL, https://… for a server with --tls-cert (env SLUICE_SERVER)")
	clientTLSFlags(cmd, dst)
}

// apiClient is the API client of cmd for server, with cmd's --ca, --cert
// and --key.
func apiClient(cmd *cobra.Command, server string) *client.Client {
	c := newClient(server)
	c.HTTP.Transport = clientTransport(cmd, server)
	return c
}

// newClient is an API client for server with no TLS flags (tests).
func newClient(server string) *client.Client {
	c := client.New(server)
	c.APIKey = os.Getenv("SLUICE_API_KEY")
	c.Retry = client.NoRetry // commands that retry say so (predict: --attempts)
	return c
}
