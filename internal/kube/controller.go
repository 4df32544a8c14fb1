package kube

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/sluiceml/sluice/client"
)

// AnnotationSpec holds the hash of the spec the controller last applied
// to a Deployment: a change of config (or a hand edit of the template)
// makes it differ, and the controller applies again.
const AnnotationSpec = "sluice.dev/spec-sha256"

// ControllerConfig configures a Controller.
type ControllerConfig struct {
	Client    *Client
	Namespace string
	// ConfigMap names the ConfigMap holding the pool config under Key
	// (default pools.yaml); it is watched: a change applies at once.
	ConfigMap string
	Key       string
	// Tick is how often the gateways' demand is read (default 2s).
	Tick time.Duration
	// APIKey authenticates the controller to the gateways (GET
	// /v1/workers) when they check keys.
	APIKey string
	// GatewayTLS, when set, makes the controller call the gateways over
	// https:// with it (sluice serve --tls-cert; a client certificate in it
	// for --tls-client-ca). A gateway pod is dialed by its IP, so the name
	// checked in its certificate is GatewayTLS.ServerName, or else the
	// pool's Service's <service>.<namespace>.svc.
	GatewayTLS *tls.Config
	Logger     *slog.Logger
}

// Controller keeps one worker Deployment per pool, sized from the
// gateway's demand.
type Controller struct {
	cfg   ControllerConfig
	log   *slog.Logger
	wake  chan struct{} // 1 slot: an informer event since the last pass
	state map[string]WorkerState

	mu     sync.Mutex
	status map[string]PoolStatus // guarded by mu
}

// PoolStatus is one pool's last decision.
type PoolStatus struct {
	Workers, Need, Current int
	Reason                 string
	DemandErr              string
}

// NewController returns a Controller; Run starts it.
func NewController(cfg ControllerConfig) *Controller {
	if cfg.Key == "" {
		cfg.Key = "pools.yaml"
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Controller{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), state: map[string]WorkerState{}, status: map[string]PoolStatus{}}
}

// Status returns each pool's last decision.
func (c *Controller) Status() map[string]PoolStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]PoolStatus, len(c.status))
	for k, v := range c.status {
		out[k] = v
	}
	return out
}

// Run reconciles until ctx ends. One controller acts per namespace: its
// Deployment runs one replica with the Recreate strategy (no leader
// election: see docs/kubernetes.md).
func (c *Controller) Run(ctx context.Context) error { return c.run(ctx) }

func (c *Controller) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Controller) run(ctx context.Context) error {
	ns, cl := c.cfg.Namespace, c.cfg.Client
	cms := cl.informer(false, "configmaps", ns, &corev1.ConfigMap{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", c.cfg.ConfigMap).String()
	})
	deps := cl.informer(true, "deployments", ns, &appsv1.Deployment{}, func(o *metav1.ListOptions) { o.LabelSelector = LabelManagedBy + "=" + ManagerName })
	svcs := cl.informer(false, "services", ns, &corev1.Service{}, nil)
	pods := cl.informer(false, "pods", ns, &corev1.Pod{}, nil)
	h := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { c.poke() }, UpdateFunc: func(any, any) { c.poke() }, DeleteFunc: func(any) { c.poke() }}
	for _, inf := range []cache.SharedIndexInformer{cms, deps} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	ictx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, inf := range []cache.SharedIndexInformer{cms, deps, svcs, pods} {
		wg.Add(1)
		go func() { defer wg.Done(); inf.Run(ictx.Done()) }()
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	synced := cache.WaitForCacheSync(sctx.Done(), cms.HasSynced, deps.HasSynced, svcs.HasSynced, pods.HasSynced)
	cancel()
	if !synced {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("controller: ConfigMaps, Deployments, Services and Pods of namespace %q not listed within 30s (check its RBAC: deploy/kubernetes/base/controller.yaml)", ns)
	}
	l := listers{ns: ns, configMaps: cms.GetStore(), deployments: deps.GetStore(), services: svcs.GetStore(), pods: pods.GetStore()}
	c.log.Info("controller running", "namespace", ns, "configmap", c.cfg.ConfigMap)
	t := time.NewTicker(c.cfg.Tick)
	defer t.Stop()
	var lastErr string
	for {
		err := c.reconcile(ctx, l)
		if msg := fmt.Sprint(err); err != nil && msg != lastErr {
			c.log.Error("controller: reconcile failed; retrying every tick", "err", err)
		}
		lastErr = ""
		if err != nil {
			lastErr = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.wake:
		case <-t.C:
		}
	}
}

// listers read the informers' caches of one namespace.
type listers struct {
	ns                                      string
	configMaps, deployments, services, pods cache.Store
}

func get[T any](st cache.Store, ns, name string) (*T, bool) {
	obj, ok, err := st.GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	t, ok := obj.(*T)
	return t, ok
}

func list[T any](st cache.Store, sel labels.Selector, labelsOf func(*T) map[string]string) []*T {
	var out []*T
	for _, obj := range st.List() {
		if t, ok := obj.(*T); ok && sel.Matches(labels.Set(labelsOf(t))) {
			out = append(out, t)
		}
	}
	return out
}

// reconcile is one pass: read the config, decide each pool's count from
// its gateway's demand, apply each Deployment whose spec or count
// changed, delete the Deployments of pools no longer configured.
func (c *Controller) reconcile(ctx context.Context, l listers) error {
	cm, ok := get[corev1.ConfigMap](l.configMaps, l.ns, c.cfg.ConfigMap)
	if !ok {
		return fmt.Errorf("ConfigMap %s/%s not found (nothing changed)", c.cfg.Namespace, c.cfg.ConfigMap)
	}
	data, ok := cm.Data[c.cfg.Key]
	if !ok {
		return fmt.Errorf("ConfigMap %s/%s has no key %q (nothing changed)", c.cfg.Namespace, c.cfg.ConfigMap, c.cfg.Key)
	}
	conf, err := ParseConfig(fmt.Sprintf("configmap/%s:%s", c.cfg.ConfigMap, c.cfg.Key), []byte(data))
	if err != nil {
		return fmt.Errorf("%w\n(nothing changed: the pools keep their last spec)", err)
	}
	keep := map[string]bool{}
	var errList []error
	now := time.Now()
	for _, p := range conf.Pools {
		keep[DeploymentName(p.Name)] = true
		cur := p.MinWorkers // a new pool starts at its floor
		live, exists := get[appsv1.Deployment](l.deployments, l.ns, DeploymentName(p.Name))
		if exists && live.Spec.Replicas != nil {
			cur = int(*live.Spec.Replicas)
		}
		demand, derr := c.demand(ctx, p, l)
		shape := Shape{MinWorkers: p.MinWorkers, MaxWorkers: p.MaxWorkers, WorkerMemory: p.WorkerMemory(), Cooldown: p.ScaleDownCooldown.Duration}
		d, st := DesiredWorkers(shape, demand, cur, c.state[p.Name], now)
		c.state[p.Name] = st
		ps := PoolStatus{Workers: d.Workers, Need: d.Need, Current: cur, Reason: d.Reason}
		if derr != nil {
			ps.DemandErr = derr.Error()
		}
		c.mu.Lock()
		prev := c.status[p.Name]
		c.status[p.Name] = ps
		c.mu.Unlock()
		if derr != nil && prev.DemandErr != ps.DemandErr {
			c.log.Warn("controller: gateway demand unavailable; holding the pool's count", "pool", p.Name, "service", p.GatewayService, "err", derr)
		}
		want := WorkerDeployment(c.cfg.Namespace, p, d.Workers)
		sum := specHash(want)
		want.Annotations = map[string]string{AnnotationSpec: sum}
		if exists && live.Annotations[AnnotationSpec] == sum && cur == d.Workers {
			continue
		}
		if err := c.apply(ctx, want); err != nil {
			errList = append(errList, fmt.Errorf("pool %s: %w", p.Name, err))
			continue
		}
		c.log.Info("controller: worker pool applied", "pool", p.Name, "deployment", want.Name, "workers", d.Workers, "from", cur,
			"image", p.Image, "reason", d.Reason)
	}
	all := list(l.deployments, labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagerName}), func(d *appsv1.Deployment) map[string]string { return d.Labels })
	for _, d := range all {
		if keep[d.Name] {
			continue
		}
		err := c.cfg.Client.deleteDeployment(ctx, c.cfg.Namespace, d.Name)
		if err != nil && !apierrors.IsNotFound(err) {
			errList = append(errList, fmt.Errorf("delete %s (its pool is no longer configured): %w", d.Name, err))
			continue
		}
		c.log.Info("controller: worker pool deleted (no longer configured)", "deployment", d.Name)
	}
	if len(errList) > 0 {
		return fmt.Errorf("%v", errList)
	}
	return nil
}

// specHash is the SHA-256 of a Deployment's spec without its replicas.
func specHash(d *appsv1.Deployment) string {
	s := d.Spec.DeepCopy()
	s.Replicas = nil
	b, _ := json.Marshal(s)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// apply writes d with server-side apply (field manager sluice-controller,
// forced: the controller owns these fields).
func (c *Controller) apply(ctx context.Context, d *appsv1.Deployment) error {
	body, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return c.cfg.Client.applyDeployment(ctx, d, body)
}

// demand reads the demand of every Ready gateway pod the pool's Service
// selects (GET /v1/workers, 2 s each, at once) and keeps, per version,
// the largest figures: each gateway's autoscaler sees its share of the
// traffic. nil with an error when no gateway answered. It reads the pods
// the Service selects, not its EndpointSlices: the same set, and it also
// works where pod IPs are loopback addresses (which EndpointSlices
// refuse), as in the e2e on kwok.
func (c *Controller) demand(ctx context.Context, p Pool, l listers) ([]Demand, error) {
	svc, ok := get[corev1.Service](l.services, l.ns, p.GatewayService)
	if !ok {
		return nil, fmt.Errorf("service %s not found", p.GatewayService)
	}
	if len(svc.Spec.Selector) == 0 {
		return nil, fmt.Errorf("service %s has no selector", p.GatewayService)
	}
	pods := list(l.pods, labels.SelectorFromSet(svc.Spec.Selector), func(p *corev1.Pod) map[string]string { return p.Labels })
	var addrs []string
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
			continue
		}
		if fence, _ := PodVerdict(pod); fence {
			continue
		}
		addrs = append(addrs, net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(p.GatewayPort)))
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("service %s selects no Ready gateway pod", p.GatewayService)
	}
	type answer struct {
		ds  []Demand
		err error
	}
	answers := make([]answer, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].ds, answers[i].err = c.gatewayDemand(ctx, a, p.GatewayService+"."+l.ns+".svc")
		}()
	}
	wg.Wait()
	merged := map[string]Demand{}
	var errList []error
	ok = false
	for _, a := range answers {
		if a.err != nil {
			errList = append(errList, a.err)
			continue
		}
		ok = true
		for _, d := range a.ds {
			m := merged[d.Version]
			m.Version = d.Version
			m.Replicas, m.Copies, m.ReplicaMemory = max(m.Replicas, d.Replicas), max(m.Copies, d.Copies), max(m.ReplicaMemory, d.ReplicaMemory)
			merged[d.Version] = m
		}
	}
	if !ok {
		return nil, errors.Join(errList...)
	}
	out := make([]Demand, 0, len(merged))
	for _, d := range merged {
		out = append(out, d)
	}
	return out, nil
}

// gatewayDemand reads the demand of the gateway at addr (host:port)
// within 2 s; over TLS its certificate is checked for serverName unless
// GatewayTLS names one.
func (c *Controller) gatewayDemand(ctx context.Context, addr, serverName string) ([]Demand, error) {
	base := "http://" + addr
	hc := &http.Client{Timeout: 2 * time.Second}
	if c.cfg.GatewayTLS != nil {
		base = "https://" + addr
		cfg := c.cfg.GatewayTLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = serverName
		}
		// One call per gateway per tick: no connection is kept between
		// them (nothing idle to own), a handshake each time.
		hc.Transport = &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true, TLSHandshakeTimeout: 2 * time.Second, ForceAttemptHTTP2: true}
	}
	cl := client.New(base)
	cl.APIKey = c.cfg.APIKey
	cl.HTTP = hc
	cl.Retry = client.NoRetry // the next tick is the retry
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	wl, err := cl.Workers(ctx)
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", base, err)
	}
	if wl.Mode != "workers" {
		return nil, fmt.Errorf("gateway %s runs replicas in process (mode %q): start it with --control-addr", base, wl.Mode)
	}
	out := make([]Demand, 0, len(wl.Demand))
	for _, d := range wl.Demand {
		out = append(out, Demand{Version: d.Version, Replicas: d.Replicas, Copies: d.Copies, ReplicaMemory: d.ReplicaMemoryBytes})
	}
	return out, nil
}
