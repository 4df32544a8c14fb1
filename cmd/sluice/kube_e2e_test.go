package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The Kubernetes commands fail with a clear error, before serving
// anything, when they cannot work (the rest is make test-kube).
func TestKubeFlagErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"kube-workers needs a control plane", []string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--kube-workers", "app=x"}, nil,
			"--kube-workers: needs --control-addr"},
		{"kube-workers outside a cluster", []string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--control-addr", "127.0.0.1:0", "--kube-workers", "app=x"}, nil,
			"KUBECONFIG is not set"},
		{"controller outside a cluster", []string{"controller"}, nil, "kubernetes: not in a pod and KUBECONFIG is not set"},
		{"controller with a bad kubeconfig", []string{"controller"}, []string{"KUBECONFIG=/nonexistent/kubeconfig"}, "KUBECONFIG /nonexistent/kubeconfig"},
		{"controller without a configmap", []string{"controller", "--configmap", ""}, nil, "--configmap: required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binary, c.args...)
			cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}, c.env...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), c.want) {
				t.Errorf("sluice %s: %v\n%s\nwant an error with %q", strings.Join(c.args, " "), err, out, c.want)
			}
		})
	}
}
