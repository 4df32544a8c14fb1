package kube

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Members is what the gateway's worker registry lets the Kubernetes view
// change (cluster.Pool implements it).
type Members interface {
	Fence(id, why string)
	Unfence(id string)
	Forget(id string)
}

// PodVerdict is what one pod's state means for routing: fence it (and
// why) or let it take traffic.
func PodVerdict(p *corev1.Pod) (fence bool, why string) {
	switch {
	case p.DeletionTimestamp != nil:
		return true, "pod terminating"
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		return true, fmt.Sprintf("pod %s", p.Status.Phase)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return false, ""
			}
			if c.Reason != "" {
				return true, "pod not ready: " + c.Reason
			}
			return true, "pod not ready"
		}
	}
	return true, "pod not ready"
}

// PodWatch keeps members in step with the worker pods matching a
// selector: a pod that is not Ready or is terminating is fenced at once, a
// Ready one unfenced, a deleted one forgotten. The pod's name is the
// worker's id (sluice worker --id $(POD_NAME)).
type PodWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// WatchPods starts a PodWatch on the pods matching selector in namespace
// and returns once they are listed (30 s at most: an error names the RBAC
// the gateway needs). Stop ends it.
func WatchPods(ctx context.Context, client *Client, namespace, selector string, m Members, log *slog.Logger) (*PodWatch, error) {
	inf := client.informer(false, "pods", namespace, &corev1.Pod{}, func(o *metav1.ListOptions) { o.LabelSelector = selector })
	apply := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if fence, why := PodVerdict(p); fence {
			m.Fence(p.Name, why)
		} else {
			m.Unfence(p.Name)
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    apply,
		UpdateFunc: func(_, obj any) { apply(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				m.Forget(p.Name)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch worker pods: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &PodWatch{cancel: cancel, done: make(chan struct{})}
	go func() { defer close(w.done); inf.Run(wctx.Done()) }()
	sctx, scancel := context.WithTimeout(wctx, 30*time.Second)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), inf.HasSynced) {
		w.Stop()
		return nil, fmt.Errorf("watch worker pods %q in namespace %q: not listed within 30s (the gateway's service account needs get, list and watch on pods there)", selector, namespace)
	}
	log.Info("watching worker pods", "namespace", namespace, "selector", selector)
	return w, nil
}

// Stop ends the watch and waits for its goroutines.
func (w *PodWatch) Stop() {
	w.cancel()
	<-w.done
}
