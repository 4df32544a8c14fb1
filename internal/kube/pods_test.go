package kube

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestPodVerdict(t *testing.T) {
	now := metav1.Now()
	ready := func(s corev1.ConditionStatus, reason string) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: s, Reason: reason}}
	}
	cases := []struct {
		name  string
		pod   corev1.Pod
		fence bool
		why   string
	}{
		{"ready", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionTrue, "")}}, false, ""},
		{"pending, no conditions", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, true, "pod not ready"},
		{"not ready", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionFalse, "ContainersNotReady")}}, true, "pod not ready: ContainersNotReady"},
		{"terminating but still ready", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionTrue, "")}}, true, "pod terminating"},
		{"failed", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Conditions: ready(corev1.ConditionTrue, "")}}, true, "pod Failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fence, why := PodVerdict(&c.pod)
			if fence != c.fence || why != c.why {
				t.Errorf("PodVerdict = %v %q, want %v %q", fence, why, c.fence, c.why)
			}
		})
	}
}

func TestPodAdmits(t *testing.T) {
	now := metav1.Now()
	ip := netip.MustParseAddr("10.1.2.3")
	running := corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.2.3", PodIPs: []corev1.PodIP{{IP: "10.1.2.3"}, {IP: "fd00::3"}}}
	cases := []struct {
		name  string
		pod   corev1.Pod
		ip    netip.Addr
		admit bool
	}{
		{"running, its IP", corev1.Pod{Status: running}, ip, true},
		{"running, its v6 IP", corev1.Pod{Status: running}, netip.MustParseAddr("fd00::3"), true},
		{"another IP", corev1.Pod{Status: running}, netip.MustParseAddr("10.1.2.4"), false},
		{"pending", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, PodIP: "10.1.2.3"}}, ip, false},
		{"terminating", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: running}, ip, false},
		{"no IP yet", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, ip, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := PodAdmits(&c.pod, c.ip); (err == nil) != c.admit {
				t.Errorf("PodAdmits = %v, want admitted %v", err, c.admit)
			}
		})
	}
}

// Admit finds the pod by the worker's id in the watch's store.
func TestPodWatchAdmit(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Namespace: "ml"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.2.3"}}
	if err := store.Add(pod); err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("10.1.2.3")
	for _, ns := range []string{"ml", ""} {
		w := &PodWatch{store: store, namespace: ns, selector: "app=w"}
		if err := w.Admit("worker-0", ip); err != nil {
			t.Errorf("namespace %q: the pod's own worker refused: %v", ns, err)
		}
		if err := w.Admit("worker-1", ip); err == nil || !strings.Contains(err.Error(), "--kube-workers") {
			t.Errorf("namespace %q: an id that is no watched pod: %v", ns, err)
		}
		if err := w.Admit("worker-0", netip.MustParseAddr("10.9.9.9")); err == nil {
			t.Errorf("namespace %q: another pod's IP admitted", ns)
		}
	}
}
