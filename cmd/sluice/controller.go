package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluiceml/sluice/internal/certs"
	"github.com/sluiceml/sluice/internal/kube"
)

func newControllerCmd() *cobra.Command {
	var (
		cfg                 kube.ControllerConfig
		namespace           string
		addr                string
		logFormat, logLevel string
		gwCA, gwCert, gwKey string
		gwServerName        string
	)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run worker pools as Kubernetes Deployments of `sluice worker` pods, sized from the gateway's autoscaler (docs/kubernetes.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logFormat, logLevel)
			if err != nil {
				return err
			}
			if cfg.ConfigMap == "" {
				return errors.New("--configmap: required, the ConfigMap holding pools.yaml (deploy/kubernetes/base)")
			}
			if cfg.Tick <= 0 {
				return fmt.Errorf("--tick %s: must be > 0", cfg.Tick)
			}
			cl, err := kube.ClientFromEnv()
			if err != nil {
				return err
			}
			cfg.Client, cfg.Namespace, cfg.Logger = cl, kube.Namespace(namespace), log
			cfg.APIKey = os.Getenv("SLUICE_API_KEY")
			if gwCA != "" || gwCert != "" || gwKey != "" || gwServerName != "" {
				if (gwCert == "") != (gwKey == "") {
					return errors.New("--gateway-cert and --gateway-key: give both (the client certificate and its private key, PEM files) or neither")
				}
				tc, err := certs.ClientConfig(gwCA, gwCert, gwKey)
				if err != nil {
					return fmt.Errorf("--gateway-ca, --gateway-cert, --gateway-key: %w", err)
				}
				tc.ServerName = gwServerName
				cfg.GatewayTLS = tc
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			c := kube.NewController(cfg)
			if addr != "" {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					return fmt.Errorf("--addr %s: %w", addr, err)
				}
				mux := http.NewServeMux()
				mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
				srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
				go func() { _ = srv.Serve(ln) }()
				defer func() {
					sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					_ = srv.Shutdown(sctx)
				}()
			}
			err = c.Run(ctx)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&namespace, "namespace", "", "namespace of the pools (default: $POD_NAMESPACE, then the service account's)")
	f.StringVar(&cfg.ConfigMap, "configmap", "sluice-pools", "ConfigMap holding the pool config (watched: a change applies at once)")
	f.StringVar(&cfg.Key, "key", "pools.yaml", "key of the pool config in the ConfigMap")
	f.DurationVar(&cfg.Tick, "tick", 2*time.Second, "how often the gateways' demand (GET /v1/workers) is read")
	f.StringVar(&addr, "addr", "", "serve GET /healthz on this address, e.g. :8090 (default: off)")
	f.StringVar(&gwCA, "gateway-ca", "", "call the gateways over https://, verified against the CAs of this PEM file (for sluice serve --tls-cert; default: plain http)")
	f.StringVar(&gwCert, "gateway-cert", "", "with --gateway-key: the client certificate (PEM) to present to gateways with --tls-client-ca; implies https://")
	f.StringVar(&gwKey, "gateway-key", "", "the private key of --gateway-cert (PEM)")
	f.StringVar(&gwServerName, "gateway-server-name", "", "the name the gateways' certificate is checked for (default: the pool's Service, <service>.<namespace>.svc); implies https://")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}
