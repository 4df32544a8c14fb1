package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const goodPool = `pools:
  - name: default
    image: sluice:1
    minWorkers: 1
    maxWorkers: 4
    join: gw:7070
    gatewayService: gw
    resources:
      limits: {cpu: "2", memory: 1Gi}
    grace: 10s
`

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig("pools.yaml", []byte(goodPool))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pools[0]
	if p.MinWorkers != 1 || p.MaxWorkers != 4 || p.Port != DefaultPort || p.PreStopDelay.Duration != DefaultPreStopDelay ||
		p.ScaleDownCooldown.Duration != DefaultScaleDownCooldown || p.Grace.Duration != 10*time.Second || p.MaxSurge != 1 ||
		p.Resources.Requests.Memory != "1Gi" || p.MemoryLimit() != 1<<30 || p.WorkerMemory() != 960<<20 {
		t.Errorf("defaults: %+v", p)
	}
	bad := []struct{ name, yaml, want string }{
		{"unknown key", strings.Replace(goodPool, "grace:", "gracee:", 1), `pools[0].gracee: unknown key "gracee"`},
		{"no image", strings.Replace(goodPool, "    image: sluice:1\n", "", 1), "pools[0].image: is required"},
		{"bad quantity", strings.Replace(goodPool, "memory: 1Gi", "memory: lots", 1), `pools[0].resources.limits.memory: "lots"`},
		{"no memory limit", strings.Replace(goodPool, `{cpu: "2", memory: 1Gi}`, `{cpu: "2"}`, 1), "resources.limits.memory: is required"},
		{"max below min", strings.Replace(goodPool, "maxWorkers: 4", "maxWorkers: 0\n    minWorkers: 3", 1), ""},
		{"bad name", strings.Replace(goodPool, "name: default", "name: Default_1", 1), `pools[0].name: "Default_1"`},
		{"bad duration", strings.Replace(goodPool, "grace: 10s", "grace: 10", 1), "pools[0].grace"},
		{"no pools", "pools: []\n", "pools: at least one pool is required"},
		{"bad artifacts", strings.Replace(goodPool, "grace: 10s", "grace: 10s\n    artifacts: /data", 1), `pools[0].artifacts: "/data"`},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			_, err := ParseConfig("pools.yaml", []byte(b.yaml))
			if err == nil || !strings.Contains(err.Error(), b.want) {
				t.Errorf("got %v, want an error with %q", err, b.want)
			}
		})
	}
}

// The worker Deployment rolls by surge, derives --worker-memory from the
// memory limit, drains within the grace, and names each worker by its pod.
func TestWorkerDeployment(t *testing.T) {
	c, err := ParseConfig("pools.yaml", []byte(goodPool))
	if err != nil {
		t.Fatal(err)
	}
	d := WorkerDeployment("ns", c.Pools[0], 3)
	if d.Name != "sluice-worker-default" || *d.Spec.Replicas != 3 {
		t.Errorf("name %s replicas %d", d.Name, *d.Spec.Replicas)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable.IntValue() != 0 || ru.MaxSurge.IntValue() != 1 {
		t.Errorf("strategy %+v", d.Spec.Strategy)
	}
	pod := d.Spec.Template.Spec
	ct := pod.Containers[0]
	args := strings.Join(ct.Args, " ")
	for _, want := range []string{"worker --join gw:7070", "--id $(POD_NAME)", "--listen $(POD_IP):9000", "--worker-memory 960MiB", "--grace 10s",
		"--ca /etc/sluice/control/ca.pem", "--join-token-file /etc/sluice/control/join-token", "--control-server-name gw", "--health-addr $(POD_IP):9001"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if *pod.TerminationGracePeriodSeconds != 10+2+5 {
		t.Errorf("terminationGracePeriodSeconds %d", *pod.TerminationGracePeriodSeconds)
	}
	if ct.Lifecycle == nil || ct.Lifecycle.PreStop.Sleep == nil || ct.Lifecycle.PreStop.Sleep.Seconds != 2 {
		t.Errorf("preStop %+v", ct.Lifecycle)
	}
	if vs := pod.Volumes; len(vs) != 2 || vs[1].Secret == nil || vs[1].Secret.SecretName != "sluice-control" || len(vs[1].Secret.Items) != 2 {
		t.Errorf("the control Secret's volume (the CA and the token, not the key): %+v", vs)
	}
	if ct.ReadinessProbe.GRPC == nil || ct.ReadinessProbe.GRPC.Port != 9001 {
		t.Errorf("readiness %+v", ct.ReadinessProbe)
	}
	if q := ct.Resources.Limits[corev1.ResourceMemory]; q.Value() != 1<<30 {
		t.Errorf("memory limit %v", q)
	}
	if d.Spec.Selector.MatchLabels[LabelPool] != "default" || d.Spec.Template.Labels[LabelName] != WorkerName {
		t.Errorf("labels %v %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	p3 := c.Pools[0]
	p3.Artifacts, p3.EnvFromSecret = "s3://b/p", "creds"
	d3 := WorkerDeployment("ns", p3, 1)
	if a := strings.Join(d3.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(a, "--artifacts s3://b/p") {
		t.Errorf("args %q lack --artifacts", a)
	}
	if ef := d3.Spec.Template.Spec.Containers[0].EnvFrom; len(ef) != 1 || ef[0].SecretRef.Name != "creds" {
		t.Errorf("envFrom %+v", ef)
	}
	// A new image changes the spec's hash (a roll); a new count does not.
	p2 := c.Pools[0]
	p2.Image = "sluice:2"
	if specHash(d) == specHash(WorkerDeployment("ns", p2, 3)) || specHash(d) != specHash(WorkerDeployment("ns", c.Pools[0], 5)) {
		t.Error("spec hash does not follow the template alone")
	}
}
