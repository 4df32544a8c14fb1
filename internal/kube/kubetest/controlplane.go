// Package kubetest runs a real Kubernetes control plane on 127.0.0.1 for
// end-to-end tests, without containers: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler (built by scripts/install-kube.sh)
// and kwok, whose fake node "runs" the pods and gives them IPs inside
// 127.0.0.0/8. Since no container runtime can run here, Kubelet plays the
// kubelet's part for the one fake node: for each Running pod it starts the
// pod's real process (its container's args, env, volumes) listening on the
// pod's IP, probes it and sets the pod's Ready condition, and on deletion
// runs the preStop hook, sends SIGTERM, waits the grace period, SIGKILLs
// and deletes the pod, as the kubelet does. It also stands in for cluster
// DNS and kube-proxy: a Service address in a pod's args is replaced by a
// Ready endpoint of it when the process starts.
//
// Everything here is test machinery: the code under test (internal/kube,
// the sluice binary, the manifests) talks to the real API server.
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	_ "embed"
)

//go:embed testdata/stages.yaml
var stages []byte

// PodCIDR is where kwok allocates pod IPs: loopback addresses, so the real
// processes the harness starts listen where Kubernetes says the pods are.
const PodCIDR = "127.1.0.0/16"

// NodeName is the fake node kwok manages.
const NodeName = "kwok-node-0"

// ControlPlane is a running control plane.
type ControlPlane struct {
	Dir        string // its files: certificates, kubeconfig, data, logs
	Bin        string // where the binaries are
	Server     string // https://127.0.0.1:PORT
	CA         []byte // PEM of the API server's CA
	Token      string // the admin's bearer token (system:masters)
	Kubeconfig string // the admin's kubeconfig file
	Client     kubernetes.Interface

	procs []*proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// freePort asks the kernel for a free port on 127.0.0.1.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (c *ControlPlane) start(name string, args ...string) (*proc, error) {
	logf, err := os.Create(filepath.Join(c.Dir, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(c.Bin, name), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return p, nil
}

// Start starts etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok from bin with their files in dir, creates the
// fake node and returns once the API server is ready and the node is
// Ready. Stop stops them.
func Start(ctx context.Context, bin, dir string) (_ *ControlPlane, err error) {
	c := &ControlPlane{Dir: dir, Bin: bin, Token: "sluice-e2e-admin-token"}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for _, d := range []string{"logs", "etcd", "certs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	ports := make([]int, 5)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	etcdPort, peerPort, apiPort, cmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	c.Server = fmt.Sprintf("https://127.0.0.1:%d", apiPort)

	etcd, err := c.start("etcd", "--name=e2e", "--data-dir="+filepath.Join(dir, "etcd"),
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", etcdPort), fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", etcdPort),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peerPort), fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", peerPort),
		fmt.Sprintf("--initial-cluster=e2e=http://127.0.0.1:%d", peerPort), "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 30*time.Second, etcd, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", etcdPort))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}); err != nil {
		return nil, fmt.Errorf("etcd: %w (log: %s)", err, filepath.Join(dir, "logs", "etcd.log"))
	}

	// Service account keys (the API server signs pod tokens with them) and
	// a static admin token.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saKey, saPub := filepath.Join(dir, "certs", "sa.key"), filepath.Join(dir, "certs", "sa.pub")
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return nil, err
	}
	tokens := filepath.Join(dir, "certs", "tokens.csv")
	if err := os.WriteFile(tokens, []byte(c.Token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	issuer := "https://kubernetes.default.svc.cluster.local"
	api, err := c.start("kube-apiserver",
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdPort),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", apiPort),
		"--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer="+issuer, "--api-audiences="+issuer,
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--enable-priority-and-fairness=false",
		"--v=1")
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if err := waitFor(ctx, 90*time.Second, api, func() bool {
		req, _ := http.NewRequest("GET", c.Server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.Token)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	}); err != nil {
		return nil, fmt.Errorf("kube-apiserver: %w (log: %s)", err, filepath.Join(dir, "logs", "kube-apiserver.log"))
	}
	// The generated serving certificate is followed by its CA.
	crt, err := os.ReadFile(filepath.Join(dir, "certs", "apiserver.crt"))
	if err != nil {
		return nil, err
	}
	var blocks [][]byte
	for rest := crt; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		blocks = append(blocks, pem.EncodeToMemory(b))
	}
	if len(blocks) < 2 {
		return nil, fmt.Errorf("apiserver.crt holds %d certificates, want the serving one and its CA", len(blocks))
	}
	c.CA = blocks[1]
	caFile := filepath.Join(dir, "certs", "ca.crt")
	if err := os.WriteFile(caFile, c.CA, 0o600); err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := WriteKubeconfig(c.Kubeconfig, c.Server, c.CA, c.Token, ""); err != nil {
		return nil, err
	}
	if c.Client, err = kubernetes.NewForConfig(&rest.Config{Host: c.Server, BearerToken: c.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CA}, QPS: 50, Burst: 100}); err != nil {
		return nil, err
	}

	if _, err := c.start("kube-controller-manager", "--kubeconfig="+c.Kubeconfig, "--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", cmPort),
		"--service-account-private-key-file="+saKey, "--root-ca-file="+caFile,
		"--use-service-account-credentials=false", "--concurrent-deployment-syncs=5", "--v=1"); err != nil {
		return nil, err
	}
	if _, err := c.start("kube-scheduler", "--kubeconfig="+c.Kubeconfig, "--leader-elect=false",
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", schedPort), "--v=1"); err != nil {
		return nil, err
	}
	stagesFile := filepath.Join(dir, "kwok-stages.yaml")
	if err := os.WriteFile(stagesFile, stages, 0o600); err != nil {
		return nil, err
	}
	kwok, err := c.start("kwok", "--kubeconfig="+c.Kubeconfig, "--config="+stagesFile,
		"--manage-all-nodes=true", "--cidr="+PodCIDR, "--node-ip=127.0.0.1")
	if err != nil {
		return nil, err
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: NodeName, Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": NodeName},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")}}}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create node: %w", err)
	}
	if err := waitFor(ctx, 60*time.Second, kwok, func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}); err != nil {
		return nil, fmt.Errorf("node %s not Ready: %w (log: %s)", NodeName, err, filepath.Join(dir, "logs", "kwok.log"))
	}
	return c, nil
}

// waitFor polls cond every 100 ms until it holds, p exits, or limit passes.
func waitFor(ctx context.Context, limit time.Duration, p *proc, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %v", p.name, p.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s", limit)
		}
	}
}

// Stop stops the processes, last started first: SIGTERM, then SIGKILL
// after 10 s.
func (c *ControlPlane) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	c.procs = nil
}

// Exited reports the control plane processes that exited.
func (c *ControlPlane) Exited() []string {
	var out []string
	for _, p := range c.procs {
		select {
		case <-p.done:
			out = append(out, fmt.Sprintf("%s: %v", p.name, p.err))
		default:
		}
	}
	return out
}

// WriteKubeconfig writes a kubeconfig for server with a bearer token.
func WriteKubeconfig(path, server string, ca []byte, token, namespace string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n", server, b64(ca))
	fmt.Fprintf(&b, "users:\n- name: e2e\n  user:\n    token: %s\n", strconv.Quote(token))
	fmt.Fprintf(&b, "contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: e2e\n")
	if namespace != "" {
		fmt.Fprintf(&b, "    namespace: %s\n", namespace)
	}
	b.WriteString("current-context: e2e\n")
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Kubectl runs the built kubectl with the admin kubeconfig.
func (c *ControlPlane) Kubectl(ctx context.Context, out io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

var errNotSupported = errors.New("not supported by the test kubelet")
