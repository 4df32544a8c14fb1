package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
