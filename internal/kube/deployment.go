package kube

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Labels the controller puts on what it owns.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelPool      = "sluice.dev/pool"
	WorkerName     = "sluice-worker"
	ManagerName    = "sluice-controller"
)

// ControlDir is where worker pods find the hop's credentials (the pool's
// ControlSecret); ImageGroup is the group of the image's user (65532,
// scripts/build-image.sh).
const (
	ControlDir = "/etc/sluice/control"
	ImageGroup = 65532
)

// DeploymentName is the Deployment of a pool.
func DeploymentName(pool string) string { return "sluice-worker-" + pool }

// WorkerSelector selects every pool's worker pods (sluice serve
// --kube-workers takes it).
const WorkerSelector = LabelName + "=" + WorkerName

// WorkerDeployment is the Deployment of pool p with n pods: `sluice
// worker` joined to the pool's gateway with the pod's name as its id,
// listening on the pod's IP; the memory limit is its --worker-memory
// (the worker would read the same figure from its cgroup's memory.max;
// passing it makes the budget explicit in the pod spec); the CA and the
// join token come from the pool's ControlSecret; readiness is its gRPC
// health on HealthPort, in clear (SERVING once registered); a preStop
// sleep keeps it serving until the gateways have seen it terminating,
// then SIGTERM drains its queues within Grace; rolls start new pods
// before old ones go (maxUnavailable 0).
func WorkerDeployment(ns string, p Pool, n int) *appsv1.Deployment {
	labels := map[string]string{LabelName: WorkerName, LabelManagedBy: ManagerName, LabelPool: p.Name}
	selector := map[string]string{LabelName: WorkerName, LabelPool: p.Name}
	mem := p.WorkerMemory()
	preStop := int64(max(0, (p.PreStopDelay.Duration.Milliseconds()+999)/1000))
	grace := int64((p.Grace.Duration.Milliseconds()+999)/1000) + preStop + 5
	port := int32(p.Port)
	cache := resource.MustParse(p.CacheBytes)
	serverName, _, err := net.SplitHostPort(p.Join)
	if err != nil {
		serverName = p.Join
	}
	args := []string{"worker",
		"--join", p.Join,
		// The hop's credentials, from the Secret (the control plane's
		// certificate is checked for the name in --join, even where the
		// address is resolved to an IP first).
		"--ca", ControlDir + "/ca.pem",
		"--join-token-file", ControlDir + "/join-token",
		"--control-server-name", serverName,
		"--health-addr", "$(POD_IP):" + strconv.Itoa(p.HealthPort),
		"--id", "$(POD_NAME)",
		"--listen", "$(POD_IP):" + strconv.Itoa(p.Port),
		"--worker-memory", fmt.Sprintf("%dMiB", max(mem>>20, 1)),
		"--grace", p.Grace.Duration.String(),
		"--cache-dir", "/var/cache/sluice",
		"--cache-bytes", strconv.FormatInt(cache.Value(), 10),
		"--log-format", p.LogFormat,
	}
	if p.Artifacts != "" {
		args = append(args, "--artifacts", p.Artifacts)
	}
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
	}
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: p.Env[k]})
	}
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, q := range []struct {
		list corev1.ResourceList
		name corev1.ResourceName
		v    string
	}{{res.Requests, corev1.ResourceCPU, p.Resources.Requests.CPU}, {res.Requests, corev1.ResourceMemory, p.Resources.Requests.Memory},
		{res.Limits, corev1.ResourceCPU, p.Resources.Limits.CPU}, {res.Limits, corev1.ResourceMemory, p.Resources.Limits.Memory}} {
		if q.v != "" {
			q.list[q.name] = resource.MustParse(q.v)
		}
	}
	probe := func(period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(p.HealthPort)}},
			PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 1}
	}
	surge := intstr.FromInt32(int32(p.MaxSurge))
	zero := intstr.FromInt32(0)
	replicas := int32(n)
	group, secretMode := int64(ImageGroup), int32(0o440)
	history := int32(3)
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: DeploymentName(p.Name), Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas:             &replicas,
			MinReadySeconds:      int32(p.MinReadySeconds),
			Selector:             &metav1.LabelSelector{MatchLabels: selector},
			RevisionHistoryLimit: &history,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &surge}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name:            "worker",
						Image:           p.Image,
						ImagePullPolicy: corev1.PullPolicy(p.ImagePullPolicy),
						Args:            args,
						Env:             env,
						Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: port, Protocol: corev1.ProtocolTCP},
							{Name: "health", ContainerPort: int32(p.HealthPort), Protocol: corev1.ProtocolTCP}},
						Resources:      res,
						ReadinessProbe: probe(1, 2),
						LivenessProbe:  probe(10, 3),
						VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/var/cache/sluice"},
							{Name: "control", MountPath: ControlDir, ReadOnly: true}},
					}},
					// The image's user (65532) reads the Secret's files
					// through their group.
					SecurityContext: &corev1.PodSecurityContext{FSGroup: &group},
					Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &cache}}},
						// Only the CA and the token: never the gateway's key.
						{Name: "control", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: p.ControlSecret, DefaultMode: &secretMode,
							Items: []corev1.KeyToPath{{Key: "ca.pem", Path: "ca.pem"}, {Key: "join-token", Path: "join-token"}}}}}},
				},
			},
		},
	}
	if p.EnvFromSecret != "" {
		d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: p.EnvFromSecret}}}}
	}
	if preStop > 0 {
		d.Spec.Template.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: preStop}}}
	}
	return d
}
