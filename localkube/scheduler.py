"""Scheduling onto localkube's one node, as kube-scheduler's filters decide it for what pods here ask of a node.

localkube has a single node (`localkube`), so scheduling is a yes or no: a pod whose `spec.nodeSelector` the node's
labels do not satisfy (kube-scheduler's NodeAffinity filter, the nodeSelector half) stays `Pending`, unbound, with
`PodScheduled=False` (reason `Unschedulable`) and a `FailedScheduling` Warning event carrying the real scheduler's
message; once the node's labels satisfy it (`kubectl label node localkube ...`), the pod is bound and runs, as the
real scheduler retries when a node changes. A pod naming its node (`spec.nodeName`) skips the scheduler, as it does
in a real cluster.

Not honoured (accepted, no effect): `spec.affinity`, taints and tolerations (the node has none), resource requests
(the node's capacity is `--max-pods`, a concurrency cap the kubelet applies after binding).

Why a module of its own: the decision is the scheduler's, not the kubelet's; the kubelet (which binds pods here, as
there is no separate scheduler loop) asks it.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

# kube-scheduler's text for one node that fails the NodeAffinity filter, preemption included (v1.34).
NODE_SELECTOR_MISMATCH = ("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. "
                          "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
UNSCHEDULABLE = "Unschedulable"  # the PodScheduled condition's reason
FAILED_SCHEDULING = "FailedScheduling"  # the Warning event's reason


def unschedulable(pod: Obj, node: Obj | None) -> str | None:
    """Why `pod` cannot go to `node` (the real scheduler's message), or None when it can."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return NODE_SELECTOR_MISMATCH
    return None


__all__ = ["FAILED_SCHEDULING", "NODE_SELECTOR_MISMATCH", "UNSCHEDULABLE", "unschedulable"]
