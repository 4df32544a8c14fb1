package kube

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
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
	cancel    context.CancelFunc
	done      chan struct{}
	store     cache.Store
	namespace string
	selector  string
}

// PodAdmits says whether the gateway may dial a worker registering from
// ip as pod p: the pod is Running, not terminating, and ip is one of its
// own IPs (a worker can register only as the pod it runs in).
func PodAdmits(p *corev1.Pod, ip netip.Addr) error {
	switch {
	case p.DeletionTimestamp != nil:
		return fmt.Errorf("pod %s is terminating", p.Name)
	case p.Status.Phase != corev1.PodRunning:
		return fmt.Errorf("pod %s is %s, not Running", p.Name, p.Status.Phase)
	}
	ips := []string{p.Status.PodIP}
	for _, pi := range p.Status.PodIPs {
		ips = append(ips, pi.IP)
	}
	for _, s := range ips {
		if a, err := netip.ParseAddr(s); err == nil && a.Unmap() == ip.Unmap() {
			return nil
		}
	}
	return fmt.Errorf("%s is not an IP of pod %s (%v)", ip, p.Name, p.Status.PodIPs)
}

// Admit is the dial policy of --kube-workers: worker id must be a
// watched pod (its name) that PodAdmits from ip.
func (w *PodWatch) Admit(id string, ip netip.Addr) error {
	var obj any
	ok := false
	if w.namespace != "" {
		var err error
		if obj, ok, err = w.store.GetByKey(w.namespace + "/" + id); err != nil {
			ok = false
		}
	} else {
		for _, o := range w.store.List() { // every namespace: the pod of that name
			if p, _ := o.(*corev1.Pod); p != nil && p.Name == id {
				obj, ok = o, true
				break
			}
		}
	}
	if !ok {
		return fmt.Errorf("no pod %q matching --kube-workers %q in namespace %q: only watched pods may register (sluice worker --id $(POD_NAME))", id, w.selector, w.namespace)
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("pod %q: not a pod in the watch's store", id)
	}
	return PodAdmits(p, ip)
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
	w := &PodWatch{cancel: cancel, done: make(chan struct{}), store: inf.GetStore(), namespace: namespace, selector: selector}
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
