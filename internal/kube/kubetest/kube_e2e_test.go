package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluiceml/sluice/internal/api"
	"github.com/sluiceml/sluice/internal/certs"
	"github.com/sluiceml/sluice/internal/kube"
	"github.com/sluiceml/sluice/internal/testwait"
)

const ns = "sluice-e2e"

// TestKubernetes drives Sluice on a real control plane: the manifests of
// deploy/kubernetes/overlays/e2e applied with kubectl, the gateway,
// controller and workers as real processes on kwok pods. Under steady
// load it scales the pool up and down, deletes a worker pod and rolls a
// new worker image, and requires every request to succeed.
//
// It needs the binaries of scripts/install-kube.sh: SLUICE_KUBE_BIN names
// their folder (make test-kube sets it).
func TestKubernetes(t *testing.T) {
	bin := os.Getenv("SLUICE_KUBE_BIN")
	if bin == "" {
		t.Skip("SLUICE_KUBE_BIN is not set: run make test-kube (scripts/install-kube.sh builds the control plane)")
	}
	dir, err := os.MkdirTemp("", "sluice-kube-")
	if err != nil {
		t.Fatal(err)
	}
	keep := os.Getenv("SLUICE_KUBE_KEEP") != ""
	t.Cleanup(func() {
		if t.Failed() || keep {
			t.Logf("files kept in %s (logs/: control plane, pods/*/container.log: the pods' processes)", dir)
			return
		}
		os.RemoveAll(dir)
	})
	// The pods run the binary of the image scripts/build-image.sh made
	// when SLUICE_IMAGE_TAR names it, else one built from this tree.
	sluice := filepath.Join(dir, "sluice")
	if img := os.Getenv("SLUICE_IMAGE_TAR"); img != "" {
		tags, err := ExtractEntrypoint(img, sluice)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pods run the entrypoint of image %v (%s)", tags, img)
	} else if out, err := exec.Command("go", "build", "-o", sluice, "../../../cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("build sluice: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	start := time.Now()
	cp, err := Start(ctx, bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	t.Logf("control plane up in %s (%s)", time.Since(start).Round(time.Millisecond), cp.Server)

	var logMu sync.Mutex
	klog, err := os.Create(filepath.Join(dir, "logs", "kubelet.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer klog.Close()
	kl := NewKubelet(cp, func(image string) (string, error) {
		if !strings.HasPrefix(image, "ghcr.io/sluiceml/sluice:") {
			return "", fmt.Errorf("image %s: the test kubelet only runs Sluice images", image)
		}
		return sluice, nil
	}, func(f string, a ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(klog, time.Now().Format("15:04:05.000 ")+f+"\n", a...)
	})
	if err := kl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()

	// The control plane's credentials, as docs/kubernetes.md has an
	// operator make them: a certificate for the control Service's names,
	// its key and a join token, in the Secret sluice-control.
	controlSecret(ctx, t, cp)

	// Apply the manifests as an operator would. The first apply can race
	// the namespace's creation: kubectl is run again until it succeeds.
	var out bytes.Buffer
	for i := 0; ; i++ {
		out.Reset()
		err := cp.Kubectl(ctx, &out, "apply", "-k", "../../../deploy/kubernetes/overlays/e2e")
		if err == nil {
			break
		}
		if i == 4 {
			t.Fatalf("%v\n%s", err, out.String())
		}
		time.Sleep(time.Second)
	}
	t.Logf("kubectl apply -k deploy/kubernetes/overlays/e2e:\n%s", out.String())

	gw := waitGateway(ctx, t, cp)
	t.Logf("gateway %s", gw)
	waitPool(ctx, t, cp, gw, 2, "ghcr.io/sluiceml/sluice:e2e-1")
	t.Logf("2 worker pods Ready and registered %s after apply", time.Since(start).Round(time.Millisecond))

	// Push a model (the iris example, a real XGBoost model) and predict.
	pkg := filepath.Join(dir, "iris")
	if err := os.CopyFS(pkg, os.DirFS("../../../examples/iris")); err != nil {
		t.Fatal(err)
	}
	push := exec.CommandContext(ctx, sluice, "push", pkg, "--server", gw)
	if b, err := push.CombinedOutput(); err != nil {
		t.Fatalf("sluice push: %v\n%s", err, b)
	} else {
		t.Logf("sluice push: %s", strings.TrimSpace(string(b)))
	}
	body := []byte(`{"instances":[{"sepalLength":5.1,"sepalWidth":3.5,"petalLength":1.4,"petalWidth":0.2}],"deadlineMs":5000}`)
	var pr api.PredictResponse
	if code, b := post(ctx, gw+"/v1/models/iris:predict", body, &pr); code != 200 {
		t.Fatalf("predict: %d %s", code, b)
	}
	t.Logf("predict through the gateway: %s answered %v", pr.ModelVersion, pr.Predictions)
	waitHolders(ctx, t, gw, "iris@1", 2)

	ld := startLoad(gw, body, 40)
	defer ld.stop()
	report := map[string]string{}

	// Scale up: the pool's floor 2 → 4.
	t0 := time.Now()
	setPools(ctx, t, cp, func(s string) string { return strings.Replace(s, "minWorkers: 2", "minWorkers: 4", 1) })
	waitPool(ctx, t, cp, gw, 4, "ghcr.io/sluiceml/sluice:e2e-1")
	report["scale up 2→4 (ConfigMap edit to 4 pods Ready and registered)"] = time.Since(t0).Round(time.Millisecond).String()

	// Scale down 4 → 2 (one pod per cooldown of 1 s, each drained).
	t0 = time.Now()
	setPools(ctx, t, cp, func(s string) string { return strings.Replace(s, "minWorkers: 4", "minWorkers: 2", 1) })
	waitPool(ctx, t, cp, gw, 2, "ghcr.io/sluiceml/sluice:e2e-1")
	report["scale down 4→2 (to 2 pods, the others drained and gone)"] = time.Since(t0).Round(time.Millisecond).String()
	waitHolders(ctx, t, gw, "iris@1", 2)

	// Delete a worker pod that holds the model, as kubectl delete pod does.
	holders := holdersOf(ctx, t, gw, "iris@1")
	victim := holders[0]
	t0 = time.Now()
	if err := cp.Client.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, cp, victim)
	waitPool(ctx, t, cp, gw, 2, "ghcr.io/sluiceml/sluice:e2e-1")
	report["delete pod (to its replacement Ready and registered)"] = time.Since(t0).Round(time.Millisecond).String()
	waitHolders(ctx, t, gw, "iris@1", 2)

	// Roll a new worker image: surge, old pods drained after new ones are Ready.
	t0 = time.Now()
	setPools(ctx, t, cp, func(s string) string { return strings.Replace(s, "sluice:e2e-1", "sluice:e2e-2", 1) })
	waitPool(ctx, t, cp, gw, 2, "ghcr.io/sluiceml/sluice:e2e-2")
	report["roll e2e-1→e2e-2 (to 2 new pods, the old ones gone)"] = time.Since(t0).Round(time.Millisecond).String()
	waitHolders(ctx, t, gw, "iris@1", 2)

	// A broken pool config changes nothing and is reported with its line.
	dep, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, kube.DeploymentName("default"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setPools(ctx, t, cp, func(s string) string { return strings.Replace(s, "maxSurge: 1", "maxSurge: 1\n    maxSurg: 2", 1) })
	ctlLog := func() string {
		pods, _ := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sluice-controller"})
		var b []byte
		for _, p := range pods.Items {
			lb, _ := os.ReadFile(filepath.Join(kl.PodDir(ns, p.Name), "container.log"))
			b = append(b, lb...)
		}
		return string(b)
	}
	poll(ctx, t, 30*time.Second, "the controller reports the bad config", func() string {
		if strings.Contains(ctlLog(), `maxSurg: unknown key \"maxSurg\"`) {
			return ""
		}
		return "no error in the controller's log yet"
	})
	if now, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, dep.Name, metav1.GetOptions{}); err != nil || now.Generation != dep.Generation {
		t.Fatalf("the Deployment changed under a bad config: generation %d → %d (%v)", dep.Generation, now.Generation, err)
	}
	setPools(ctx, t, cp, func(s string) string { return strings.Replace(s, "\n    maxSurg: 2", "", 1) })

	// Scale from the autoscaler's demand: two models of 300 MiB a copy
	// (two copies each) cannot share a worker of 512 MiB, so the second
	// does not fit the two workers there are; the gateway's demand says
	// so, the controller grows the pool to 4 and the new workers take it.
	t0 = time.Now()
	for _, m := range []string{"big-a", "big-b"} {
		d := filepath.Join(dir, m)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		manifest := "name: " + m + "\nruntime: synthetic\nartifact: cost.json\ninput:\n  schema: big-input@1\n  fields: [{name: x, type: float}]\n" +
			"output:\n  schema: big-output@1\n  fields: [{name: y}]\nserving:\n  memory: 300MiB\n  defaultDeadline: 2s\n"
		if err := os.WriteFile(filepath.Join(d, "model.yaml"), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cost.json"), []byte(`{"base": "1ms", "mode": "sleep", "memory": "300MiB"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := exec.CommandContext(ctx, sluice, "push", d, "--server", gw, "--wait", "0").CombinedOutput()
		if err != nil {
			t.Fatalf("sluice push %s: %v\n%s", m, err, b)
		}
		t.Logf("sluice push: %s", strings.TrimSpace(string(b)))
	}
	waitPool(ctx, t, cp, gw, 4, "ghcr.io/sluiceml/sluice:e2e-2")
	waitHolders(ctx, t, gw, "big-a@1", 2)
	waitHolders(ctx, t, gw, "big-b@1", 2)
	report["scale up 2→4 from the gateway's demand (push to 4 pods Ready, both models on 2 workers each)"] = time.Since(t0).Round(time.Millisecond).String()
	bigBody := []byte(`{"instances":[{"x":1}],"deadlineMs":5000}`)
	for _, m := range []string{"big-a", "big-b"} {
		if code, b := post(ctx, gw+"/v1/models/"+m+":predict", bigBody, nil); code != 200 {
			t.Errorf("predict %s: %d %s", m, code, b)
		}
	}

	// Delete both models: the demand falls back to iris's two copies and
	// the pool shrinks to its floor, one drained pod per cooldown.
	t0 = time.Now()
	for _, m := range []string{"big-a", "big-b"} {
		if b, err := exec.CommandContext(ctx, sluice, "delete", m, "--server", gw, "--reason", "e2e").CombinedOutput(); err != nil {
			t.Fatalf("sluice delete %s: %v\n%s", m, err, b)
		}
	}
	waitPool(ctx, t, cp, gw, 2, "ghcr.io/sluiceml/sluice:e2e-2")
	waitHolders(ctx, t, gw, "iris@1", 2)
	report["scale down 4→2 from the gateway's demand (delete the models to 2 pods, the others drained and gone)"] = time.Since(t0).Round(time.Millisecond).String()

	sent, failed, fails := ld.stop()
	keys := make([]string, 0, len(report))
	for k := range report {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var rb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&rb, "  %s: %s\n", k, report[k])
	}
	fmt.Fprintf(&rb, "  requests sent under load: %d, failed: %d (skipped, all %d in flight: %d)\n", sent, failed, maxInFlight, ld.skipped.Load())
	t.Logf("results:\n%s", rb.String())
	if p := os.Getenv("SLUICE_KUBE_REPORT"); p != "" {
		_ = os.WriteFile(p, []byte(rb.String()), 0o644)
	}
	if failed > 0 {
		t.Errorf("%d of %d requests failed; first ones:\n%s", failed, sent, strings.Join(fails, "\n"))
	}
	if sent < 100 {
		t.Errorf("only %d requests sent: the load did not run", sent)
	}
	if ex := kl.Exits(); len(ex) > 0 {
		t.Errorf("processes exited without being asked to:\n%s", strings.Join(ex, "\n"))
	}
	if ex := cp.Exited(); len(ex) > 0 {
		t.Errorf("control plane processes exited: %v", ex)
	}
}

// poll calls cond until it returns "" or the limit passes (testwait's
// poll); then the test fails with cond's last answer. A cancelled ctx fails
// it at once.
func poll(ctx context.Context, t *testing.T, limit time.Duration, what string, cond func() string) {
	t.Helper()
	testwait.UntilNil(t, limit, func() error {
		if err := ctx.Err(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if why := cond(); why != "" {
			return fmt.Errorf("%s: %s", what, why)
		}
		return nil
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitGateway(ctx context.Context, t *testing.T, cp *ControlPlane) string {
	t.Helper()
	var url string
	poll(ctx, t, 3*time.Minute, "gateway pod Ready", func() string {
		pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=sluice-gateway"})
		if err != nil {
			return err.Error()
		}
		for _, p := range pods.Items {
			if podReady(&p) && p.DeletionTimestamp == nil {
				url = "http://" + p.Status.PodIP + ":8080"
				return ""
			}
		}
		return fmt.Sprintf("%d gateway pods, none Ready", len(pods.Items))
	})
	return url
}

// waitPool waits until the worker Deployment has n pods, all Ready and of
// image, none terminating, and the gateway lists exactly those n as ready
// workers.
func waitPool(ctx context.Context, t *testing.T, cp *ControlPlane, gw string, n int, image string) {
	t.Helper()
	poll(ctx, t, 4*time.Minute, fmt.Sprintf("%d workers of %s", n, image), func() string {
		pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.WorkerSelector})
		if err != nil {
			return err.Error()
		}
		want := map[string]bool{}
		var states []string
		for _, p := range pods.Items {
			states = append(states, fmt.Sprintf("%s(%s ready=%v deleting=%v)", p.Name, p.Spec.Containers[0].Image, podReady(&p), p.DeletionTimestamp != nil))
			if p.DeletionTimestamp != nil || !podReady(&p) || p.Spec.Containers[0].Image != image {
				return "pods: " + strings.Join(states, " ")
			}
			want[p.Name] = true
		}
		if len(want) != n {
			return "pods: " + strings.Join(states, " ")
		}
		var wl api.WorkerList
		if code, b := get(ctx, gw+"/v1/workers", &wl); code != 200 {
			return fmt.Sprintf("GET /v1/workers: %d %s", code, b)
		}
		ready := 0
		var seen []string
		for _, w := range wl.Workers {
			seen = append(seen, w.ID+":"+w.State)
			if w.State == "ready" {
				if !want[w.ID] {
					return "gateway routes to a worker with no Ready pod: " + strings.Join(seen, " ")
				}
				ready++
			}
		}
		if ready != n {
			return "gateway workers: " + strings.Join(seen, " ")
		}
		return ""
	})
}

func holdersOf(ctx context.Context, t *testing.T, gw, version string) []string {
	t.Helper()
	var wl api.WorkerList
	if code, b := get(ctx, gw+"/v1/workers", &wl); code != 200 {
		t.Fatalf("GET /v1/workers: %d %s", code, b)
	}
	var out []string
	for _, w := range wl.Workers {
		for _, v := range w.Versions {
			if w.State == "ready" && v.Version == version && v.State == "ready" && v.ReadyReplicas > 0 {
				out = append(out, w.ID)
			}
		}
	}
	sort.Strings(out)
	return out
}

func waitHolders(ctx context.Context, t *testing.T, gw, version string, n int) {
	t.Helper()
	poll(ctx, t, 2*time.Minute, fmt.Sprintf("%s on %d workers", version, n), func() string {
		if h := holdersOf(ctx, t, gw, version); len(h) < n {
			return fmt.Sprintf("held by %v", h)
		}
		return ""
	})
}

func waitGone(ctx context.Context, t *testing.T, cp *ControlPlane, pod string) {
	t.Helper()
	poll(ctx, t, 2*time.Minute, "pod "+pod+" gone", func() string {
		_, err := cp.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err == nil {
			return "still there"
		}
		return ""
	})
}

// setPools edits pools.yaml in the sluice-pools ConfigMap (kubectl edit).
func setPools(ctx context.Context, t *testing.T, cp *ControlPlane, edit func(string) string) {
	t.Helper()
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(ctx, "sluice-pools", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := cm.Data["pools.yaml"]
	cm.Data["pools.yaml"] = edit(before)
	if cm.Data["pools.yaml"] == before {
		t.Fatalf("the edit changed nothing in:\n%s", before)
	}
	if _, err := cp.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

func get(ctx context.Context, url string, v any) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	return do(req, v)
}

func post(ctx context.Context, url string, body []byte, v any) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return do(req, v)
}

func do(req *http.Request, v any) (int, string) {
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == 200 && v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			return 0, err.Error()
		}
	}
	return resp.StatusCode, string(b)
}

// maxInFlight bounds the load's concurrent requests.
const maxInFlight = 32

// load sends predictions open loop at a steady rate and counts failures.
type load struct {
	sent, failed, skipped atomic.Int64
	mu                    sync.Mutex
	fails                 []string
	cancel                context.CancelFunc
	wg                    sync.WaitGroup
	once                  sync.Once
}

func startLoad(gw string, body []byte, rate int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	sem := make(chan struct{}, maxInFlight)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tk := time.NewTicker(time.Second / time.Duration(rate))
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			select {
			case sem <- struct{}{}:
			default:
				l.skipped.Add(1)
				continue
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer func() { <-sem }()
				l.sent.Add(1)
				rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer rcancel()
				code, b := post(rctx, gw+"/v1/models/iris:predict", body, nil)
				if code != 200 {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.fails) < 20 {
						l.fails = append(l.fails, fmt.Sprintf("%s: %d %s", time.Now().Format("15:04:05.000"), code, strings.TrimSpace(b)))
					}
					l.mu.Unlock()
				}
			}()
		}
	}()
	return l
}

// stop ends the load and waits for the requests in flight.
func (l *load) stop() (sent, failed int64, fails []string) {
	l.once.Do(func() { l.cancel(); l.wg.Wait() })
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent.Load(), l.failed.Load(), append([]string(nil), l.fails...)
}

// controlSecret creates the namespace and the Secret sluice-control the
// manifests mount (ca.pem and key.pem: a self-signed certificate for the
// gateway's control Service; join-token).
func controlSecret(ctx context.Context, t *testing.T, cp *ControlPlane) {
	t.Helper()
	_, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	svc := "sluice-gateway-control"
	certPEM, keyPEM, err := certs.SelfSigned([]string{svc, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kube.DefaultControlSecret, Namespace: ns},
		Data: map[string][]byte{"ca.pem": certPEM, "key.pem": keyPEM, "join-token": []byte(hex.EncodeToString(token) + "\n")}}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
