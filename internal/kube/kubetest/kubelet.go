package kubetest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Kubelet runs the real processes of the pods on the fake node.
type Kubelet struct {
	cp *ControlPlane
	// Binary maps a container image to the executable that stands for
	// it (every Sluice image holds the sluice binary).
	Binary func(image string) (string, error)
	// Logf reports what the kubelet does (t.Logf).
	Logf func(format string, args ...any)

	mu      sync.Mutex // guards pods, exits
	pods    map[types.UID]*podRun
	exits   []string // unexpected process exits
	wg      sync.WaitGroup
	factory informers.SharedInformerFactory
	cancel  context.CancelFunc
}

// podRun is one pod's process and its lifecycle.
type podRun struct {
	uid       types.UID
	ns, name  string
	image     string
	dir       string
	stopping  chan struct{} // closed when deletion began
	stopOnce  sync.Once
	done      chan struct{} // closed when the pod is finished with (process gone, pod deleted)
	mu        sync.Mutex    // guards cmd
	cmd       *exec.Cmd
	exited    chan struct{} // closed when the current cmd exited
	started   time.Time
	readyAt   time.Time
	restarts  int
	pod       *corev1.Pod // as first seen Running
	deleteAt  time.Time
	graceSecs int64
}

// NewKubelet returns a Kubelet for cp's fake node; Run starts it.
func NewKubelet(cp *ControlPlane, binary func(string) (string, error), logf func(string, ...any)) *Kubelet {
	return &Kubelet{cp: cp, Binary: binary, Logf: logf, pods: map[types.UID]*podRun{}}
}

// Run watches the node's pods until Stop.
func (k *Kubelet) Run(ctx context.Context) error {
	ctx, k.cancel = context.WithCancel(ctx)
	k.factory = informers.NewSharedInformerFactoryWithOptions(k.cp.Client, time.Minute,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", NodeName).String()
		}))
	inf := k.factory.Core().V1().Pods().Informer()
	handle := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			k.sync(ctx, p)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: handle, UpdateFunc: func(_, o any) { handle(o) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				k.forceStop(p.UID)
			}
		}}); err != nil {
		return err
	}
	k.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("kubelet: pods not listed")
	}
	return nil
}

// Stop kills every process and waits for the pods' goroutines.
func (k *Kubelet) Stop() {
	if k.cancel != nil {
		k.cancel()
	}
	k.mu.Lock()
	runs := make([]*podRun, 0, len(k.pods))
	for _, r := range k.pods {
		runs = append(runs, r)
	}
	k.mu.Unlock()
	for _, r := range runs {
		r.kill()
	}
	k.wg.Wait()
	if k.factory != nil {
		k.factory.Shutdown()
	}
}

// Exits lists the processes that exited without being asked to.
func (k *Kubelet) Exits() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.exits...)
}

// PodDir is where a pod's files are (logs, volumes).
func (k *Kubelet) PodDir(ns, name string) string { return filepath.Join(k.cp.Dir, "pods", ns+"_"+name) }

func (k *Kubelet) sync(ctx context.Context, p *corev1.Pod) {
	k.mu.Lock()
	r := k.pods[p.UID]
	if r == nil && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
		r = &podRun{uid: p.UID, ns: p.Namespace, name: p.Name, dir: k.PodDir(p.Namespace, p.Name), pod: p.DeepCopy(),
			stopping: make(chan struct{}), done: make(chan struct{})}
		k.pods[p.UID] = r
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			k.runPod(ctx, r)
		}()
	}
	k.mu.Unlock()
	if p.DeletionTimestamp != nil {
		if r == nil {
			// Never started here: finish the deletion at once.
			k.finalDelete(ctx, p.Namespace, p.Name, p.UID)
			return
		}
		r.stopOnce.Do(func() {
			r.deleteAt = p.DeletionTimestamp.Time
			if p.DeletionGracePeriodSeconds != nil {
				r.graceSecs = *p.DeletionGracePeriodSeconds
			}
			close(r.stopping)
		})
	}
}

func (k *Kubelet) forceStop(uid types.UID) {
	k.mu.Lock()
	r := k.pods[uid]
	k.mu.Unlock()
	if r != nil {
		r.kill()
	}
}

func (r *podRun) kill() {
	r.stopOnce.Do(func() { close(r.stopping) })
	r.mu.Lock()
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
	}
	r.mu.Unlock()
}

// runPod starts the pod's process, restarts it when it exits on its own
// (restartPolicy Always, 1 s back-off), probes it, and runs the
// termination sequence once the pod is being deleted.
func (k *Kubelet) runPod(ctx context.Context, r *podRun) {
	defer close(r.done)
	p := r.pod
	if len(p.Spec.Containers) != 1 {
		k.Logf("kubelet: pod %s/%s: %d containers: %v", p.Namespace, p.Name, len(p.Spec.Containers), errNotSupported)
		return
	}
	ct := p.Spec.Containers[0]
	r.image = ct.Image
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		k.Logf("kubelet: %v", err)
		return
	}
	readyCh := make(chan bool, 1)
	for {
		if err := k.startProcess(ctx, r, p, ct); err != nil {
			k.Logf("kubelet: pod %s/%s: %v", p.Namespace, p.Name, err)
			select {
			case <-r.stopping:
				k.terminate(ctx, r, ct)
				return
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				continue
			}
		}
		r.mu.Lock()
		exited := r.exited
		r.mu.Unlock()
		pctx, stopProbe := context.WithCancel(ctx)
		probeDone := make(chan struct{})
		go func() { defer close(probeDone); k.probe(pctx, r, ct, readyCh) }()
		select {
		case <-exited:
			stopProbe()
			<-probeDone
			select {
			case <-r.stopping:
				k.finalDelete(ctx, r.ns, r.name, r.uid)
				return
			default:
			}
			k.mu.Lock()
			k.exits = append(k.exits, fmt.Sprintf("%s/%s (%s): %v", r.ns, r.name, r.image, r.cmd.ProcessState))
			k.mu.Unlock()
			k.Logf("kubelet: pod %s/%s: process exited on its own (%v); restarting in 1s (log %s)", r.ns, r.name, r.cmd.ProcessState, filepath.Join(r.dir, "container.log"))
			k.setReady(ctx, r, false)
			r.restarts++
			select {
			case <-time.After(time.Second):
			case <-r.stopping:
				k.finalDelete(ctx, r.ns, r.name, r.uid)
				return
			case <-ctx.Done():
				return
			}
		case <-r.stopping:
			k.terminate(ctx, r, ct)
			stopProbe()
			<-probeDone
			k.finalDelete(ctx, r.ns, r.name, r.uid)
			return
		case <-ctx.Done():
			stopProbe()
			<-probeDone
			return
		}
	}
}

// terminate runs the preStop hook, sends SIGTERM and waits for the exit
// until the grace period ends, then SIGKILLs.
func (k *Kubelet) terminate(ctx context.Context, r *podRun, ct corev1.Container) {
	grace := time.Duration(r.graceSecs) * time.Second
	if r.graceSecs == 0 && r.pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*r.pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	deadline := time.Now().Add(grace)
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	if ct.Lifecycle != nil && ct.Lifecycle.PreStop != nil {
		switch h := ct.Lifecycle.PreStop; {
		case h.Sleep != nil:
			select {
			case <-time.After(min(time.Duration(h.Sleep.Seconds)*time.Second, time.Until(deadline))):
			case <-exited:
			}
		default:
			k.Logf("kubelet: pod %s/%s: preStop handler %v", r.ns, r.name, errNotSupported)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		k.Logf("kubelet: pod %s/%s: exited %v after SIGTERM", r.ns, r.name, cmd.ProcessState)
	case <-time.After(time.Until(deadline)):
		k.Logf("kubelet: pod %s/%s: grace period %s over: SIGKILL", r.ns, r.name, grace)
		_ = cmd.Process.Kill()
		<-exited
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-exited
	}
}

func (k *Kubelet) finalDelete(ctx context.Context, ns, name string, uid types.UID) {
	zero := int64(0)
	err := k.cp.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		k.Logf("kubelet: delete pod %s/%s: %v", ns, name, err)
	}
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(VAR) references as the kubelet does (unknown ones stay).
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// startProcess builds the container's environment and args (env, envFrom,
// $(VAR) expansion, emptyDir volumes under the pod's folder, Service
// addresses resolved to endpoints, a kubeconfig with the pod's service
// account token) and starts it.
func (k *Kubelet) startProcess(ctx context.Context, r *podRun, p *corev1.Pod, ct corev1.Container) error {
	bin, err := k.Binary(ct.Image)
	if err != nil {
		return err
	}
	env := map[string]string{}
	var order []string
	set := func(kv, v string) {
		if _, ok := env[kv]; !ok {
			order = append(order, kv)
		}
		env[kv] = v
	}
	for _, ef := range ct.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := k.cp.Client.CoreV1().ConfigMaps(p.Namespace).Get(ctx, ef.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("envFrom configmap %s: %w", ef.ConfigMapRef.Name, err)
			}
			for kk, v := range cm.Data {
				set(ef.Prefix+kk, v)
			}
		case ef.SecretRef != nil:
			s, err := k.cp.Client.CoreV1().Secrets(p.Namespace).Get(ctx, ef.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if ef.SecretRef.Optional != nil && *ef.SecretRef.Optional {
					continue
				}
				return fmt.Errorf("envFrom secret %s: %w", ef.SecretRef.Name, err)
			}
			for kk, v := range s.Data {
				set(ef.Prefix+kk, string(v))
			}
		}
	}
	for _, e := range ct.Env {
		v := expand(e.Value, env)
		if e.ValueFrom != nil {
			switch {
			case e.ValueFrom.FieldRef != nil:
				switch e.ValueFrom.FieldRef.FieldPath {
				case "metadata.name":
					v = p.Name
				case "metadata.namespace":
					v = p.Namespace
				case "status.podIP":
					v = p.Status.PodIP
				case "spec.nodeName":
					v = p.Spec.NodeName
				case "spec.serviceAccountName":
					v = p.Spec.ServiceAccountName
				default:
					return fmt.Errorf("env %s: fieldRef %s: %w", e.Name, e.ValueFrom.FieldRef.FieldPath, errNotSupported)
				}
			case e.ValueFrom.ConfigMapKeyRef != nil:
				cm, err := k.cp.Client.CoreV1().ConfigMaps(p.Namespace).Get(ctx, e.ValueFrom.ConfigMapKeyRef.Name, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("env %s: %w", e.Name, err)
				}
				v = cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
			case e.ValueFrom.SecretKeyRef != nil:
				s, err := k.cp.Client.CoreV1().Secrets(p.Namespace).Get(ctx, e.ValueFrom.SecretKeyRef.Name, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("env %s: %w", e.Name, err)
				}
				v = string(s.Data[e.ValueFrom.SecretKeyRef.Key])
			default:
				return fmt.Errorf("env %s: %w", e.Name, errNotSupported)
			}
		}
		set(e.Name, v)
	}
	// Volumes: emptyDirs become folders of the pod; their mount paths in
	// args are rewritten to them.
	mounts := map[string]string{}
	for _, vm := range ct.VolumeMounts {
		for _, vol := range p.Spec.Volumes {
			if vol.Name != vm.Name {
				continue
			}
			if vol.EmptyDir == nil && vol.Projected == nil && vol.Secret == nil {
				return fmt.Errorf("volume %s: only emptyDir and secret: %w", vol.Name, errNotSupported)
			}
			if vol.EmptyDir != nil {
				d := filepath.Join(r.dir, "volumes", vol.Name)
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
				mounts[vm.MountPath] = d
			}
			if vol.Secret != nil {
				d, err := k.secretVolume(ctx, r, p.Namespace, vol.Name, vol.Secret)
				if err != nil {
					return err
				}
				mounts[vm.MountPath] = d
			}
		}
	}
	// The pod's service account: a token from the TokenRequest API in a
	// kubeconfig (what an in-cluster client reads from its mounted token).
	if sa := p.Spec.ServiceAccountName; sa != "" && sa != "default" {
		exp := int64(3600)
		tr, err := k.cp.Client.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa,
			&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp,
				BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("token of service account %s: %w", sa, err)
		}
		kc := filepath.Join(r.dir, "kubeconfig")
		if err := WriteKubeconfig(kc, k.cp.Server, k.cp.CA, tr.Status.Token, p.Namespace); err != nil {
			return err
		}
		set("KUBECONFIG", kc)
	}
	args := append(append([]string(nil), ct.Command...), ct.Args...)
	if len(ct.Command) > 0 {
		args = args[1:] // the image's entrypoint is the binary
	}
	for i, a := range args {
		a = expand(a, env)
		for mp, d := range mounts {
			a = strings.ReplaceAll(a, mp, d)
		}
		a, err = k.resolveServices(ctx, p.Namespace, a)
		if err != nil {
			return err
		}
		args[i] = a
	}
	set("HOME", r.dir)
	set("PATH", "/usr/bin:/bin")
	logf, err := os.OpenFile(filepath.Join(r.dir, "container.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	for _, kk := range order {
		cmd.Env = append(cmd.Env, kk+"="+env[kk])
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	r.mu.Lock()
	r.cmd, r.exited, r.started = cmd, exited, time.Now()
	r.mu.Unlock()
	k.Logf("kubelet: pod %s/%s (%s) started pid %d on %s: %s", p.Namespace, p.Name, ct.Image, cmd.Process.Pid, p.Status.PodIP, strings.Join(args, " "))
	return nil
}

var hostPort = regexp.MustCompile(`\b([a-z0-9]([-a-z0-9]*[a-z0-9])?)((\.[a-z0-9-]+)*):([0-9]{1,5})\b`)

// secretVolume writes a Secret's keys (or the items named) as files of
// the pod's folder, with the volume's mode (default 0644, as the kubelet):
// the folder stands in for the mount path.
func (k *Kubelet) secretVolume(ctx context.Context, r *podRun, ns, name string, sv *corev1.SecretVolumeSource) (string, error) {
	sec, err := k.cp.Client.CoreV1().Secrets(ns).Get(ctx, sv.SecretName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("volume %s: secret %s: %w", name, sv.SecretName, err)
	}
	d := filepath.Join(r.dir, "volumes", name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	mode := os.FileMode(0o644)
	if sv.DefaultMode != nil {
		mode = os.FileMode(*sv.DefaultMode)
	}
	files := map[string]string{} // key → path in the volume
	for key := range sec.Data {
		files[key] = key
	}
	if len(sv.Items) > 0 {
		files = map[string]string{}
		for _, it := range sv.Items {
			files[it.Key] = it.Path
		}
	}
	for key, path := range files {
		b, ok := sec.Data[key]
		if !ok {
			return "", fmt.Errorf("volume %s: secret %s has no key %s", name, sv.SecretName, key)
		}
		if err := os.WriteFile(filepath.Join(d, path), b, mode); err != nil {
			return "", err
		}
		if err := os.Chmod(filepath.Join(d, path), mode); err != nil {
			return "", err
		}
	}
	return d, nil
}

// resolveServices replaces SERVICE[.NS[.svc[.cluster.local]]]:PORT in s
// with the address of a pod the Service selects (Ready, or any with an IP
// when it publishes not-ready addresses; waiting up to 60 s for one), the
// port mapped to its target: cluster DNS and kube-proxy's job. It reads
// pods, not EndpointSlices, because EndpointSlices refuse the loopback
// addresses kwok gives the pods here.
func (k *Kubelet) resolveServices(ctx context.Context, ns, s string) (string, error) {
	var firstErr error
	out := hostPort.ReplaceAllStringFunc(s, func(m string) string {
		sm := hostPort.FindStringSubmatch(m)
		name, rest, port := sm[1], sm[3], sm[5]
		svcNS := ns
		if rest != "" {
			parts := strings.Split(strings.TrimPrefix(rest, "."), ".")
			svcNS = parts[0]
			if tail := strings.Join(parts[1:], "."); tail != "" && tail != "svc" && tail != "svc.cluster.local" {
				return m
			}
		}
		svc, err := k.cp.Client.CoreV1().Services(svcNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil || len(svc.Spec.Selector) == 0 {
			return m // not a Service with a selector
		}
		pn, _ := strconv.Atoi(port)
		var sp *corev1.ServicePort
		for i := range svc.Spec.Ports {
			if int(svc.Spec.Ports[i].Port) == pn {
				sp = &svc.Spec.Ports[i]
			}
		}
		if sp == nil {
			return m
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			if addr := k.endpoint(ctx, svc, sp); addr != "" {
				return addr
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				firstErr = fmt.Errorf("service %s/%s: no ready endpoint within 60s", svcNS, name)
				return m
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	return out, firstErr
}

func (k *Kubelet) endpoint(ctx context.Context, svc *corev1.Service, sp *corev1.ServicePort) string {
	sel := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector})
	pods, err := k.cp.Client.CoreV1().Pods(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return ""
	}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil || (!svc.Spec.PublishNotReadyAddresses && !podIsReady(&p)) {
			continue
		}
		target := sp.TargetPort.IntValue()
		if name := portName(sp.TargetPort.String(), target); name != "" {
			target = 0
			for _, ct := range p.Spec.Containers {
				for _, cp := range ct.Ports {
					if cp.Name == name {
						target = int(cp.ContainerPort)
					}
				}
			}
		}
		if target == 0 {
			target = int(sp.Port)
		}
		return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(target))
	}
	return ""
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// probe runs the readiness probe every period and sets the pod's Ready
// condition when its outcome changes (success once, failure after
// failureThreshold in a row).
func (k *Kubelet) probe(ctx context.Context, r *podRun, ct corev1.Container, _ chan bool) {
	pr := ct.ReadinessProbe
	ready := false
	if pr == nil {
		k.setReady(ctx, r, true)
		return
	}
	period := time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
	failures := 0
	threshold := int(max(pr.FailureThreshold, 1))
	t := time.NewTicker(min(period, 500*time.Millisecond)) // first success seen within half a second
	defer t.Stop()
	last := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.stopping:
			return
		case <-t.C:
		}
		if ready && time.Since(last) < period {
			continue
		}
		last = time.Now()
		ok := k.check(ctx, r.pod, ct, pr)
		switch {
		case ok && !ready:
			ready, failures = true, 0
			r.readyAt = time.Now()
			k.setReady(ctx, r, true)
		case !ok && ready:
			failures++
			if failures >= threshold {
				ready = false
				k.setReady(ctx, r, false)
			}
		case ok:
			failures = 0
		}
	}
}

func containerPort(ct corev1.Container, p intOrName) int {
	if p.name == "" {
		return p.num
	}
	for _, cp := range ct.Ports {
		if cp.Name == p.name {
			return int(cp.ContainerPort)
		}
	}
	return 0
}

type intOrName struct {
	num  int
	name string
}

func (k *Kubelet) check(ctx context.Context, p *corev1.Pod, ct corev1.Container, pr *corev1.Probe) bool {
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case pr.HTTPGet != nil:
		port := containerPort(ct, intOrName{num: pr.HTTPGet.Port.IntValue(), name: portName(pr.HTTPGet.Port.String(), pr.HTTPGet.Port.IntValue())})
		req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s%s", net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)), pr.HTTPGet.Path), nil)
		if err != nil {
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	case pr.GRPC != nil:
		conn, err := grpc.NewClient(net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(pr.GRPC.Port))), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return false
		}
		defer conn.Close()
		svc := ""
		if pr.GRPC.Service != nil {
			svc = *pr.GRPC.Service
		}
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		return err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING
	case pr.TCPSocket != nil:
		port := containerPort(ct, intOrName{num: pr.TCPSocket.Port.IntValue(), name: portName(pr.TCPSocket.Port.String(), pr.TCPSocket.Port.IntValue())})
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)))
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	return false
}

func portName(s string, n int) string {
	if n != 0 {
		return ""
	}
	return s
}

// setReady patches the pod's Ready and ContainersReady conditions.
func (k *Kubelet) setReady(ctx context.Context, r *podRun, ready bool) {
	st, reason := "False", "ContainersNotReady"
	if ready {
		st, reason = "True", ""
	}
	now := time.Now().UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"reason":%q,"lastTransitionTime":%q},{"type":"ContainersReady","status":%q,"reason":%q,"lastTransitionTime":%q}],"containerStatuses":[{"name":%q,"ready":%v,"restartCount":%d,"image":%q,"imageID":"","state":{"running":{"startedAt":%q}}}]}}`,
		st, reason, now, st, reason, now, r.pod.Spec.Containers[0].Name, ready, r.restarts, r.pod.Spec.Containers[0].Image, now)
	_, err := k.cp.Client.CoreV1().Pods(r.ns).Patch(ctx, r.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
		k.Logf("kubelet: pod %s/%s: set ready=%v: %v", r.ns, r.name, ready, err)
	}
}

// Pods is what the kubelet runs now: pod name → image, pid.
func (k *Kubelet) Pods() map[string]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]string{}
	for _, r := range k.pods {
		select {
		case <-r.done:
			continue
		default:
		}
		out[r.ns+"/"+r.name] = r.image
	}
	return out
}
