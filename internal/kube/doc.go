// Package kube runs Sluice's worker pools on Kubernetes. It owns three
// things and nothing else:
//
//   - the pool config (pools.go): what a pool of `sluice worker` pods is
//     (image, resources, bounds, drain), decoded strictly;
//   - the controller (controller.go): it keeps one Deployment per pool,
//     sized by DesiredWorkers (workers.go, a pure function of the gateway's
//     autoscaler demand), rolled by surge so no request is dropped;
//   - the gateway's view of worker pods (pods.go): a pod that is not
//     Ready or is terminating is fenced out of routing at once, a deleted
//     one forgotten (cluster.Pool's Fence/Unfence/Forget seam).
//
// Why `sluice controller` is a subcommand and not a mode of serve: it
// needs the right to write Deployments, which a gateway facing clients
// should not hold; one runs per namespace while gateways may be several;
// and its failures never reach the predict path.
//
// Why a Deployment and not a StatefulSet: workers hold no state that must
// outlive them (artifacts are re-fetched by SHA-256 into a local cache,
// replicas are reloaded by placement), and only a Deployment rolls with
// maxSurge: the new pod is Ready before an old one is asked to drain, so
// capacity never drops during a roll. StatefulSets give stable names (so
// rendezvous shards would not move) but replace a pod only after the old
// one is gone.
//
// Why no CRD: a pool is a handful of fields owned by one controller in one
// namespace. A ConfigMap (kustomize generates it) needs no cluster-scoped
// install, no conversion webhooks across versions, and is read with the
// same strict decoder as every other Sluice config (unknown keys are
// errors with their line). The Deployments the controller writes are the
// status an operator reads with the usual tools.
//
// Registration and heartbeats (internal/cluster) stay the source of what
// a worker holds; the Kubernetes API only says whether it may take
// traffic. The package never sits on the predict path.
package kube
