package kube

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/sluiceml/sluice/internal/strictyaml"
)

// Config is the controller's pool config (a ConfigMap key, pools.yaml).
type Config struct {
	Pools []Pool `yaml:"pools"`
}

// Pool is one set of `sluice worker` pods joined to one gateway.
type Pool struct {
	// Name names the Deployment (sluice-worker-NAME) and the pods' pool label.
	Name  string `yaml:"name"`
	Image string `yaml:"image"`
	// ImagePullPolicy: IfNotPresent (default), Always or Never.
	ImagePullPolicy string `yaml:"imagePullPolicy"`
	// MinWorkers and MaxWorkers bound the pods (defaults 2 and MinWorkers).
	MinWorkers int `yaml:"minWorkers"`
	MaxWorkers int `yaml:"maxWorkers"`
	// Join is the gateway's control address the workers register with
	// (sluice serve --control-addr), e.g. sluice-gateway-control:7070.
	Join string `yaml:"join"`
	// GatewayService names the Service of the pool's gateways: the
	// controller reads the autoscaler's demand (GET /v1/workers) from
	// every Ready pod it selects, on GatewayPort (the container's HTTP
	// port, default 8080), and takes, per version, the largest.
	GatewayService string `yaml:"gatewayService"`
	GatewayPort    int    `yaml:"gatewayPort"`
	Port           int    `yaml:"port"` // the worker's gRPC port (default 9000; TLS)
	// HealthPort serves the worker's gRPC health alone, in clear, for the
	// kubelet's probes, which speak no TLS (default Port+1).
	HealthPort int `yaml:"healthPort"`
	// ControlSecret names the Secret holding the gateway's control CA (key
	// ca.pem) and the join token (key join-token): both are mounted in
	// every worker pod (default sluice-control; docs/kubernetes.md).
	ControlSecret string    `yaml:"controlSecret"`
	Resources     Resources `yaml:"resources"`
	// MemoryReserve is what the worker process needs beyond its versions'
	// memory: its budget (--worker-memory) is limits.memory less this
	// (default 64Mi; at most half the limit).
	MemoryReserve string `yaml:"memoryReserve"`
	// Grace is how long a worker drains queued work after SIGTERM
	// (sluice worker --grace; default 30s).
	Grace strictyaml.Duration `yaml:"grace"`
	// PreStopDelay is how long a terminating pod keeps serving before
	// SIGTERM, so every gateway has seen it terminating and stopped
	// routing to it (default 2s; the gateways watch pods, so this is the
	// API's watch latency, not a guess at an endpoint controller's).
	PreStopDelay strictyaml.Duration `yaml:"preStopDelay"`
	// ScaleDownCooldown: the pool shrinks by one pod only after its
	// demand stayed below the current count this long (default 2m).
	ScaleDownCooldown strictyaml.Duration `yaml:"scaleDownCooldown"`
	// MinReadySeconds is how long a new pod must stay Ready before a roll
	// retires an old one (default 5): the gateway places the versions
	// of the pod about to go onto the new one meanwhile.
	MinReadySeconds int `yaml:"minReadySeconds"`
	// MaxSurge is how many extra pods a roll starts at once (default 1);
	// maxUnavailable is always 0.
	MaxSurge int `yaml:"maxSurge"`
	// CacheBytes bounds each worker's artifact cache (default 2GiB, an
	// emptyDir of that size limit).
	CacheBytes string `yaml:"cacheBytes"`
	// Env is extra environment of the worker container (e.g.
	// SLUICE_ONNXRUNTIME_LIB); values only, no secrets here.
	Env map[string]string `yaml:"env"`
	// Artifacts, when set, is the object store the workers read artifacts
	// from directly (sluice worker --artifacts s3://BUCKET/PREFIX, the
	// gateway's --artifacts); without it they fetch them from the gateway.
	Artifacts string `yaml:"artifacts"`
	// EnvFromSecret names a Secret whose keys become the workers'
	// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION,
	// AWS_ENDPOINT_URL for Artifacts): credentials stay out of this file.
	EnvFromSecret string `yaml:"envFromSecret"`
	// LogFormat is the worker's --log-format (default json).
	LogFormat string `yaml:"logFormat"`
}

// Resources are the worker container's requests and limits, as
// Kubernetes quantities ("500m", "2Gi"). limits.memory is required: it is
// the worker's memory budget (--worker-memory), which placement fills.
type Resources struct {
	Requests Quantities `yaml:"requests"`
	Limits   Quantities `yaml:"limits"`
}

// Quantities are cpu and memory.
type Quantities struct {
	CPU    string `yaml:"cpu"`
	Memory string `yaml:"memory"`
}

// Defaults.
const (
	DefaultMinWorkers        = 2
	DefaultPort              = 9000
	DefaultGrace             = 30 * time.Second
	DefaultPreStopDelay      = 2 * time.Second
	DefaultScaleDownCooldown = 2 * time.Minute
	DefaultMinReadySeconds   = 5
	DefaultControlSecret     = "sluice-control"
)

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// ParseConfig decodes and validates a pools.yaml. Every problem is
// reported with its path and line; defaults are filled in.
func ParseConfig(file string, data []byte) (*Config, error) {
	var c Config
	idx, err := strictyaml.Decode(file, data, &c)
	if err != nil {
		return nil, err
	}
	var probs []strictyaml.Problem
	bad := func(path, format string, a ...any) {
		probs = append(probs, strictyaml.Problem{Line: idx.Line(path), Path: path, Message: fmt.Sprintf(format, a...)})
	}
	if len(c.Pools) == 0 {
		bad("pools", "at least one pool is required")
	}
	seen := map[string]bool{}
	for i := range c.Pools {
		p := &c.Pools[i]
		at := func(k string) string { return fmt.Sprintf("pools[%d].%s", i, k) }
		if !nameRE.MatchString(p.Name) {
			bad(at("name"), "%q: lowercase letters, digits and '-', at most 40 characters (it names the Deployment sluice-worker-NAME)", p.Name)
		} else if seen[p.Name] {
			bad(at("name"), "%q: a second pool of that name", p.Name)
		}
		seen[p.Name] = true
		if p.Image == "" {
			bad(at("image"), "is required (the image holding the sluice binary, e.g. built by scripts/build-image.sh)")
		}
		switch p.ImagePullPolicy {
		case "":
			p.ImagePullPolicy = "IfNotPresent"
		case "IfNotPresent", "Always", "Never":
		default:
			bad(at("imagePullPolicy"), "%q: use IfNotPresent, Always or Never", p.ImagePullPolicy)
		}
		if p.MinWorkers < 0 {
			bad(at("minWorkers"), "%d: must be >= 0", p.MinWorkers)
		}
		if _, written := idx[at("minWorkers")]; !written {
			p.MinWorkers = DefaultMinWorkers // not written (a written 0 is kept)
		}
		if p.MaxWorkers == 0 {
			p.MaxWorkers = max(p.MinWorkers, 1)
		}
		if p.MaxWorkers < p.MinWorkers || p.MaxWorkers < 1 {
			bad(at("maxWorkers"), "%d: must be >= minWorkers (%d) and >= 1", p.MaxWorkers, p.MinWorkers)
		}
		if p.Join == "" {
			bad(at("join"), "is required: the gateway's control address, e.g. sluice-gateway-control:7070")
		}
		if p.GatewayService == "" {
			bad(at("gatewayService"), "is required: the gateways' Service, e.g. sluice-gateway")
		}
		if p.GatewayPort == 0 {
			p.GatewayPort = 8080
		}
		if p.GatewayPort < 1 || p.GatewayPort > 65535 {
			bad(at("gatewayPort"), "%d: must be 1..65535", p.GatewayPort)
		}
		if p.Port == 0 {
			p.Port = DefaultPort
		}
		if p.Port < 1 || p.Port > 65535 {
			bad(at("port"), "%d: must be 1..65535", p.Port)
		}
		if p.HealthPort == 0 {
			p.HealthPort = p.Port + 1
		}
		if p.HealthPort < 1 || p.HealthPort > 65535 || p.HealthPort == p.Port {
			bad(at("healthPort"), "%d: must be 1..65535 and not the port (%d)", p.HealthPort, p.Port)
		}
		if p.ControlSecret == "" {
			p.ControlSecret = DefaultControlSecret
		}
		for _, q := range []struct{ path, v string }{
			{"resources.requests.cpu", p.Resources.Requests.CPU}, {"resources.requests.memory", p.Resources.Requests.Memory},
			{"resources.limits.cpu", p.Resources.Limits.CPU}, {"resources.limits.memory", p.Resources.Limits.Memory},
		} {
			if q.v == "" {
				continue
			}
			if n, err := resource.ParseQuantity(q.v); err != nil || n.Sign() <= 0 {
				bad(at(q.path), "%q: a Kubernetes quantity more than 0 like \"500m\" or \"2Gi\"", q.v)
			}
		}
		if p.Resources.Limits.Memory == "" {
			bad(at("resources.limits.memory"), "is required: it is the worker's memory budget (--worker-memory), e.g. \"2Gi\"")
		}
		if p.MemoryReserve == "" {
			p.MemoryReserve = "64Mi"
		}
		if q, err := resource.ParseQuantity(p.MemoryReserve); err != nil || q.Sign() < 0 {
			bad(at("memoryReserve"), "%q: a Kubernetes quantity >= 0 like \"64Mi\"", p.MemoryReserve)
		}
		if p.Resources.Requests.Memory == "" {
			p.Resources.Requests.Memory = p.Resources.Limits.Memory
		}
		if p.Resources.Requests.CPU == "" {
			p.Resources.Requests.CPU = p.Resources.Limits.CPU
		}
		if p.Resources.Limits.Memory != "" && p.Resources.Requests.Memory != "" {
			lm, err1 := resource.ParseQuantity(p.Resources.Limits.Memory)
			rm, err2 := resource.ParseQuantity(p.Resources.Requests.Memory)
			if err1 == nil && err2 == nil && rm.Cmp(lm) > 0 {
				bad(at("resources.requests.memory"), "%s: must be <= limits.memory (%s)", p.Resources.Requests.Memory, p.Resources.Limits.Memory)
			}
		}
		for _, d := range []struct {
			path string
			v    *strictyaml.Duration
			def  time.Duration
		}{{"grace", &p.Grace, DefaultGrace}, {"preStopDelay", &p.PreStopDelay, DefaultPreStopDelay}, {"scaleDownCooldown", &p.ScaleDownCooldown, DefaultScaleDownCooldown}} {
			if d.v.Duration < 0 {
				bad(at(d.path), "%s: must be >= 0", d.v.Duration)
			}
			if _, written := idx[at(d.path)]; !written {
				d.v.Duration = d.def
			}
		}
		if p.MinReadySeconds < 0 {
			bad(at("minReadySeconds"), "%d: must be >= 0", p.MinReadySeconds)
		}
		if _, written := idx[at("minReadySeconds")]; !written {
			p.MinReadySeconds = DefaultMinReadySeconds
		}
		if p.MaxSurge < 0 {
			bad(at("maxSurge"), "%d: must be >= 0 (0: 1)", p.MaxSurge)
		}
		if p.MaxSurge == 0 {
			p.MaxSurge = 1
		}
		if p.CacheBytes == "" {
			p.CacheBytes = "2Gi"
		}
		if n, err := resource.ParseQuantity(p.CacheBytes); err != nil || n.Sign() <= 0 {
			bad(at("cacheBytes"), "%q: a Kubernetes quantity more than 0 like \"2Gi\"", p.CacheBytes)
		}
		if p.Artifacts != "" && !strings.HasPrefix(p.Artifacts, "s3://") {
			bad(at("artifacts"), "%q: an object store URL s3://BUCKET/PREFIX", p.Artifacts)
		}
		if p.EnvFromSecret != "" && (!subdomainRE.MatchString(p.EnvFromSecret) || len(p.EnvFromSecret) > 253) {
			bad(at("envFromSecret"), "%q: not a Secret name", p.EnvFromSecret)
		}
		switch p.LogFormat {
		case "":
			p.LogFormat = "json"
		case "json", "text":
		default:
			bad(at("logFormat"), "%q: use json or text", p.LogFormat)
		}
		for k := range p.Env {
			if !envRE.MatchString(k) {
				bad(at("env."+k), "not a valid environment variable name")
			}
		}
	}
	if len(probs) > 0 {
		return nil, &strictyaml.Error{File: file, Problems: probs}
	}
	return &c, nil
}

var subdomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

var envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MemoryLimit is the pool's memory limit in bytes.
func (p Pool) MemoryLimit() int64 {
	q, err := resource.ParseQuantity(p.Resources.Limits.Memory)
	if err != nil {
		return 0
	}
	return q.Value()
}

// WorkerMemory is each worker's memory budget (--worker-memory): the
// memory limit less MemoryReserve, which the process itself needs beyond
// what its versions hold (the Go runtime, gRPC buffers, the artifact
// being fetched: an idle worker's RSS is about 40 MiB).
func (p Pool) WorkerMemory() int64 {
	q, err := resource.ParseQuantity(p.MemoryReserve)
	if err != nil {
		return p.MemoryLimit()
	}
	return max(p.MemoryLimit()-q.Value(), p.MemoryLimit()/2)
}
