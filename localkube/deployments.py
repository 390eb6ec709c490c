"""The Deployment and ReplicaSet controllers of kube-controller-manager.

- A Deployment owns one ReplicaSet per pod template (`<deployment>-<pod-template-hash>`, the hash also a
  label of the ReplicaSet, its selector and its pods) and rolls from the old ones to the new one within
  `maxSurge`/`maxUnavailable` (RollingUpdate), or scales the old ones to zero first (Recreate). Its status
  (replicas, updated, ready, available, observedGeneration, the Available and Progressing conditions) is
  what `kubectl rollout status` reads.
- A ReplicaSet keeps `replicas` pods that are neither finished nor being deleted: it creates the missing
  ones (`<replicaset>-<5 chars>`) and deletes the surplus (not-ready ones first, then the newest); a pod
  that failed or completed is deleted and replaced. A pod whose ServiceAccount does not exist yet is
  refused by the API server: the controller records FailedCreate and retries, as the real one does.

`minReadySeconds` is not honoured (a ready pod is available at once); `revisionHistoryLimit` is.
"""

from __future__ import annotations

import logging
from typing import Any

from .apiserver import APIServer
from .controllers import WorkQueue, record_event
from .errors import StatusError
from .request import INTERNAL, DeleteOptions
from .store import DELETED, Event, Obj
from .util import deep, owner_ref, set_condition
from .workloads import REVISION, TEMPLATE_HASH, scaled, selector_matches, template_hash

log = logging.getLogger("localkube.deployments")

DEPLOYMENTS = ("apps", "deployments")
REPLICASETS = ("apps", "replicasets")
PODS = ("", "pods")
Key = tuple[str, str]


def _owned(objs: list[Obj], owner: Obj) -> list[Obj]:
    uid = owner["metadata"]["uid"]
    return [o for o in objs if any(r.get("uid") == uid and r.get("controller")
                                   for r in o["metadata"].get("ownerReferences") or [])]


def _controller_of(obj: Obj, kind: str) -> str | None:
    for r in obj["metadata"].get("ownerReferences") or []:
        if r.get("kind") == kind and r.get("controller"):
            return str(r["name"])
    return None


def pod_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _active(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


class ReplicaSetController:
    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.queue = WorkQueue("replicaset", self._sync)
        api.store.add_listener(self._on_event)

    def _on_event(self, ev: Event) -> None:
        m = ev.obj["metadata"]
        if ev.key == REPLICASETS and ev.type != DELETED:
            self.queue.add((m["namespace"], m["name"]))
        elif ev.key == PODS:
            owner = _controller_of(ev.obj, "ReplicaSet")
            if owner:
                self.queue.add((m["namespace"], owner))

    def start(self) -> None:
        self.queue.start()
        for rs in self.api.store.select(REPLICASETS):
            self.queue.add((rs["metadata"]["namespace"], rs["metadata"]["name"]))

    def _rt(self, resource: str) -> Any:
        group = "" if resource == "pods" else "apps"
        return self.api.registry.lookup(group, "v1", resource)

    async def _sync(self, key: Key) -> None:
        ns, name = key
        rs = self.api.store.get(REPLICASETS, ns, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        pods = _owned(self.api.store.select(PODS, ns), rs)
        for p in pods:
            if not _active(p) and not p["metadata"].get("deletionTimestamp"):
                self._delete(p)  # finished: replaced below
        active = [p for p in pods if _active(p)]
        want = int(rs["spec"].get("replicas", 1))
        if len(active) < want:
            for _ in range(want - len(active)):
                pod = self._create_pod(rs)
                if pod is None:
                    self.queue.add_after(key, 1.0)
                    break
                active.append(pod)
        elif len(active) > want:
            # Not-ready pods go first, then the newest (the real controller's ranking, simplified).
            doomed = [p for p in active if not pod_ready(p)]
            doomed += sorted((p for p in active if pod_ready(p)),
                             key=lambda p: p["metadata"].get("creationTimestamp", ""), reverse=True)
            for p in doomed[:len(active) - want]:
                self._delete(p)
                active.remove(p)
        ready = sum(1 for p in active if pod_ready(p))
        labels = rs["spec"].get("template", {}).get("metadata", {}).get("labels") or {}
        status = {
            "replicas": len(active),
            "fullyLabeledReplicas": sum(1 for p in active if all(
                (p["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        for k in ("readyReplicas", "availableReplicas"):
            if not status[k]:
                del status[k]
        if status != rs.get("status"):
            fresh = self.api.store.get(REPLICASETS, ns, name)
            if fresh is None:
                return
            new = deep(fresh)
            new["status"] = status
            self.api.update(self._rt("replicasets"), ns, name, new, INTERNAL, "status")

    def _create_pod(self, rs: Obj) -> Obj | None:
        m = rs["metadata"]
        template = deep(rs["spec"].get("template") or {})
        tm = template.get("metadata") or {}
        pod: Obj = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{m['name']}-", "namespace": m["namespace"],
                         "labels": tm.get("labels") or {}, "ownerReferences": [owner_ref(rs)]},
            "spec": template.get("spec") or {},
        }
        if tm.get("annotations"):
            pod["metadata"]["annotations"] = tm["annotations"]
        try:
            created = self.api.create(self._rt("pods"), m["namespace"], pod, INTERNAL)
        except StatusError as e:
            record_event(self.api, rs, "FailedCreate", f"Error creating: {e.message}", type_="Warning",
                         component="replicaset-controller")
            return None
        record_event(self.api, rs, "SuccessfulCreate", f"Created pod: {created['metadata']['name']}",
                     component="replicaset-controller")
        return created

    def _delete(self, pod: Obj) -> None:
        try:
            self.api.delete(self._rt("pods"), pod["metadata"]["namespace"], pod["metadata"]["name"], DeleteOptions())
        except StatusError as e:
            if e.code != 404:
                raise


class DeploymentController:
    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.queue = WorkQueue("deployment", self._sync)
        api.store.add_listener(self._on_event)

    def _on_event(self, ev: Event) -> None:
        m = ev.obj["metadata"]
        if ev.key == DEPLOYMENTS and ev.type != DELETED:
            self.queue.add((m["namespace"], m["name"]))
        elif ev.key == REPLICASETS:
            owner = _controller_of(ev.obj, "Deployment")
            if owner:
                self.queue.add((m["namespace"], owner))

    def start(self) -> None:
        self.queue.start()
        for d in self.api.store.select(DEPLOYMENTS):
            self.queue.add((d["metadata"]["namespace"], d["metadata"]["name"]))

    @property
    def _rs_rt(self) -> Any:
        return self.api.registry.lookup("apps", "v1", "replicasets")

    @property
    def _d_rt(self) -> Any:
        return self.api.registry.lookup("apps", "v1", "deployments")

    async def _sync(self, key: Key) -> None:
        ns, name = key
        d = self.api.store.get(DEPLOYMENTS, ns, name)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return
        spec = d["spec"]
        want = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        h = template_hash(template)
        rses = _owned(self.api.store.select(REPLICASETS, ns), d)
        rses += [rs for rs in self.api.store.select(REPLICASETS, ns) if rs not in rses
                 and not rs["metadata"].get("ownerReferences")
                 and selector_matches(spec.get("selector") or {}, rs["metadata"].get("labels") or {})]
        new_rs = next((rs for rs in rses if (rs["metadata"].get("labels") or {}).get(TEMPLATE_HASH) == h), None)
        old = [rs for rs in rses if rs is not new_rs]
        revision = 1 + max((int((rs["metadata"].get("annotations") or {}).get(REVISION, "0")) for rs in rses),
                           default=0)
        if new_rs is None:
            new_rs = self._create_rs(d, h, revision, replicas=0 if old else want)
            if new_rs is None:
                self.queue.add_after(key, 1.0)
                return
        else:
            revision = int((new_rs["metadata"].get("annotations") or {}).get(REVISION, str(revision)))
        strategy = spec.get("strategy") or {}
        if strategy.get("type") == "Recreate":
            self._recreate(new_rs, old, want)
        else:
            self._roll(new_rs, old, want, strategy.get("rollingUpdate") or {})
        self._prune_history(d, old)
        self._write_status(d, new_rs, old, want, revision)

    def _scale(self, rs: Obj, replicas: int) -> None:
        if rs["spec"].get("replicas") == replicas:
            return
        fresh = self.api.store.get(REPLICASETS, rs["metadata"]["namespace"], rs["metadata"]["name"])
        if fresh is None:
            return
        new = deep(fresh)
        new["spec"]["replicas"] = replicas
        self.api.update(self._rs_rt, rs["metadata"]["namespace"], rs["metadata"]["name"], new, INTERNAL)
        rs["spec"]["replicas"] = replicas

    def _recreate(self, new_rs: Obj, old: list[Obj], want: int) -> None:
        for rs in old:
            self._scale(rs, 0)
        pods_left = any((rs.get("status") or {}).get("replicas") for rs in old)
        if not pods_left:
            self._scale(new_rs, want)

    def _roll(self, new_rs: Obj, old: list[Obj], want: int, ru: Obj) -> None:
        surge = scaled(ru.get("maxSurge", "25%"), want, round_up=True)
        unavailable = scaled(ru.get("maxUnavailable", "25%"), want, round_up=False)
        if surge == 0 and unavailable == 0:
            unavailable = 1
        every = [new_rs, *old]
        total = sum(int(rs["spec"].get("replicas", 0)) for rs in every)
        # Scale up the new ReplicaSet within the surge.
        if int(new_rs["spec"].get("replicas", 0)) < want:
            room = max(0, want + surge - total)
            self._scale(new_rs, min(want, int(new_rs["spec"].get("replicas", 0)) + room))
        elif int(new_rs["spec"].get("replicas", 0)) > want:
            self._scale(new_rs, want)
        # Scale down old ones while enough pods stay available.
        available = sum(int((rs.get("status") or {}).get("availableReplicas", 0)) for rs in every)
        can_remove = available - (want - unavailable)
        for rs in old:
            current = int(rs["spec"].get("replicas", 0))
            if not current:
                continue
            # Pods of an old ReplicaSet that are not available can go at once: they serve nobody.
            unready = current - int((rs.get("status") or {}).get("availableReplicas", 0))
            cut = min(current, max(0, unready) + max(0, can_remove))
            if cut:
                can_remove -= max(0, cut - max(0, unready))
                self._scale(rs, current - cut)

    def _prune_history(self, d: Obj, old: list[Obj]) -> None:
        limit = int(d["spec"].get("revisionHistoryLimit", 10))
        idle = sorted((rs for rs in old if not rs["spec"].get("replicas") and not (rs.get("status") or {}).get("replicas")),
                      key=lambda rs: int((rs["metadata"].get("annotations") or {}).get(REVISION, "0")))
        for rs in idle[:max(0, len(idle) - limit)]:
            try:
                self.api.delete(self._rs_rt, rs["metadata"]["namespace"], rs["metadata"]["name"], DeleteOptions())
            except StatusError as e:
                if e.code != 404:
                    raise

    def _create_rs(self, d: Obj, h: str, revision: int, *, replicas: int) -> Obj | None:
        m = d["metadata"]
        template = deep(d["spec"].get("template") or {})
        tm = template.setdefault("metadata", {})
        tm.setdefault("labels", {})[TEMPLATE_HASH] = h
        selector = deep(d["spec"].get("selector") or {})
        selector.setdefault("matchLabels", {})[TEMPLATE_HASH] = h
        rs: Obj = {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{m['name']}-{h}", "namespace": m["namespace"],
                         "labels": dict(tm["labels"]), "annotations": {REVISION: str(revision)},
                         "ownerReferences": [owner_ref(d)]},
            "spec": {"replicas": replicas, "selector": selector, "template": template,
                     "minReadySeconds": d["spec"].get("minReadySeconds", 0)},
        }
        try:
            created = self.api.create(self._rs_rt, m["namespace"], rs, INTERNAL)
        except StatusError as e:
            if e.code == 409:
                return self.api.store.get(REPLICASETS, m["namespace"], rs["metadata"]["name"])
            record_event(self.api, d, "FailedCreate", f"Error creating: {e.message}", type_="Warning",
                         component="deployment-controller")
            return None
        record_event(self.api, d, "ScalingReplicaSet",
                     f"Scaled up replica set {created['metadata']['name']} from 0 to {replicas}",
                     component="deployment-controller")
        return created

    def _write_status(self, d: Obj, new_rs: Obj, old: list[Obj], want: int, revision: int) -> None:
        ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
        every = [new_rs, *old]

        def st(rs: Obj, k: str) -> int:
            fresh = self.api.store.get(REPLICASETS, ns, rs["metadata"]["name"]) or rs
            return int((fresh.get("status") or {}).get(k, 0))

        replicas = sum(st(rs, "replicas") for rs in every)
        updated = st(new_rs, "replicas")
        ready = sum(st(rs, "readyReplicas") for rs in every)
        available = sum(st(rs, "availableReplicas") for rs in every)
        ru = (d["spec"].get("strategy") or {}).get("rollingUpdate") or {}
        min_available = want - scaled(ru.get("maxUnavailable", "25%"), want, round_up=False) \
            if (d["spec"].get("strategy") or {}).get("type") != "Recreate" else want
        fresh = self.api.store.get(DEPLOYMENTS, ns, name)
        if fresh is None:
            return
        new = deep(fresh)
        status = deep(fresh.get("status") or {})
        status.update(observedGeneration=fresh["metadata"].get("generation", 1), replicas=replicas,
                      updatedReplicas=updated, readyReplicas=ready, availableReplicas=available,
                      unavailableReplicas=max(0, want - available))
        for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"):
            if not status[k]:
                del status[k]
        conds = status.setdefault("conditions", [])
        if available >= min_available:
            set_condition(conds, "Available", "True", reason="MinimumReplicasAvailable",
                          message="Deployment has minimum availability.")
        else:
            set_condition(conds, "Available", "False", reason="MinimumReplicasUnavailable",
                          message="Deployment does not have minimum availability.")
        rs_name = new_rs["metadata"]["name"]
        if updated == want and available >= want and replicas == want:
            set_condition(conds, "Progressing", "True", reason="NewReplicaSetAvailable",
                          message=f'ReplicaSet "{rs_name}" has successfully progressed.')
        else:
            set_condition(conds, "Progressing", "True", reason="ReplicaSetUpdated",
                          message=f'ReplicaSet "{rs_name}" is progressing.')
        new["status"] = status
        annotations = new["metadata"].setdefault("annotations", {})
        if annotations.get(REVISION) != str(revision):
            annotations[REVISION] = str(revision)
            self.api.update(self._d_rt, ns, name, new, INTERNAL)
            fresh = self.api.store.get(DEPLOYMENTS, ns, name)
            if fresh is None:
                return
            new = deep(fresh)
            new["status"] = status
        if _differs(new.get("status") or {}, fresh.get("status") or {}):
            self.api.update(self._d_rt, ns, name, new, INTERNAL, "status")


def _differs(a: Obj, b: Obj) -> bool:
    """Status changed beyond condition timestamps (a rewrite per event would be an event storm)."""
    def strip(s: Obj) -> Obj:
        out = deep(s)
        for c in out.get("conditions") or []:
            c.pop("lastUpdateTime", None)
            c.pop("lastTransitionTime", None)
            c.pop("lastProbeTime", None)
        return out
    return strip(a) != strip(b)
