package kube

import (
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client connects to the Kubernetes API: the file KUBECONFIG names when
// it is set, else the pod's service account (in-cluster).
func Client() (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if path := os.Getenv("KUBECONFIG"); path != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: KUBECONFIG %s: %w", path, err)
		}
	} else if cfg, err = rest.InClusterConfig(); err != nil {
		return nil, fmt.Errorf("kubernetes: not in a pod and KUBECONFIG is not set: %w", err)
	}
	cfg.UserAgent = "sluice"
	return kubernetes.NewForConfig(cfg)
}

// Namespace is the namespace flag's value, else POD_NAMESPACE, else the
// service account's namespace file, else "default".
func Namespace(flag string) string {
	if flag != "" {
		return flag
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(b) > 0 {
		return string(b)
	}
	return "default"
}
