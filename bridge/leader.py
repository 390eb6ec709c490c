"""Lease-based leader election (coordination.k8s.io/v1), as client-go's leaderelection does it.

Several bridge replicas may run; only the holder of the Lease watches and acts. A leader
that cannot renew within the lease duration loses it and stops acting; a follower takes an
expired lease over. Writes use resourceVersion, so two candidates never both win.

A renewal that hangs must not keep a leader acting past its lease: every attempt has a deadline
(client-go's renewDeadline), after which the attempt counts as failed and the leader steps down,
and every request carries that deadline as its timeout. The deadline plus the renew interval stays
below the lease duration, so a leader has stopped before any follower can take the lease over.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

from kubernetes import client

from kube import Conflict, KubeError, NotFound, typed_errors
from models.timestamps import rfc3339_micro

log = logging.getLogger("agentrun.bridge.leader")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaderElector:
    def __init__(self, api: client.ApiClient, *, namespace: str, name: str, identity: str,
                 lease_seconds: int = 15, renew_seconds: float = 5.0, renew_deadline: float | None = None) -> None:
        # Default: what the lease leaves after one renew interval, less a margin for clock skew and scheduling.
        deadline = renew_deadline if renew_deadline is not None else (lease_seconds - renew_seconds) * 0.75
        if deadline <= 0 or renew_seconds + deadline >= lease_seconds:
            raise ValueError(f"lease of {lease_seconds} s: the renew interval ({renew_seconds:g} s) and the renew "
                             f"deadline ({deadline:g} s) must be positive and add up to less than the lease")
        self.coord = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.renew_deadline = deadline
        self.is_leader = asyncio.Event()
        self.lost = asyncio.Event()

    async def run(self) -> None:
        """Try to acquire, then keep renewing; sets `is_leader`, and `lost` if leadership goes."""
        while True:
            try:
                held = await asyncio.wait_for(asyncio.to_thread(self._try_acquire_or_renew), self.renew_deadline)
            except TimeoutError:
                log.warning("lease %s/%s: no answer within the renew deadline (%g s)", self.namespace, self.name,
                            self.renew_deadline)
                held = False
            except Exception as e:
                log.warning("lease %s/%s: %s", self.namespace, self.name, e)
                held = False
            if held and not self.is_leader.is_set():
                log.info("%s became leader", self.identity)
                self.is_leader.set()
            elif not held and self.is_leader.is_set():
                log.warning("%s lost leadership", self.identity)
                self.is_leader.clear()
                self.lost.set()
            await asyncio.sleep(self.renew_seconds if held else self.renew_seconds / 2)

    def _try_acquire_or_renew(self) -> bool:
        now = _now()
        try:
            with typed_errors(f"read Lease {self.namespace}/{self.name}"):
                lease: Any = self.coord.read_namespaced_lease(self.name, self.namespace,
                                                              _request_timeout=self.renew_deadline)
        except NotFound:
            body: Any = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_seconds,
                             "acquireTime": rfc3339_micro(now), "renewTime": rfc3339_micro(now), "leaseTransitions": 0}}
            try:
                with typed_errors(f"create Lease {self.namespace}/{self.name}"):
                    self.coord.create_namespaced_lease(self.namespace, body, _request_timeout=self.renew_deadline)
                return True
            except Conflict:
                return False  # another replica created it first
        spec = lease.spec
        holder = spec.holder_identity or ""
        renew = spec.renew_time
        duration = spec.lease_duration_seconds or self.lease_seconds
        expired = renew is None or (now - renew).total_seconds() > duration
        if holder != self.identity and not expired:
            return False
        new_spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_seconds,
                    "renewTime": rfc3339_micro(now)}
        if holder != self.identity:
            new_spec["acquireTime"] = rfc3339_micro(now)
            new_spec["leaseTransitions"] = (spec.lease_transitions or 0) + 1
        patch = {"metadata": {"resourceVersion": lease.metadata.resource_version}, "spec": new_spec}
        try:
            with typed_errors(f"renew Lease {self.namespace}/{self.name}"):
                self.coord.patch_namespaced_lease(self.name, self.namespace, patch, _request_timeout=self.renew_deadline)
            return True
        except Conflict:
            return False  # another replica wrote it in between

    def release(self) -> None:
        """Give the lease up on a clean shutdown, so another replica takes over at once."""
        if not self.is_leader.is_set():
            return
        try:
            with typed_errors(f"release Lease {self.namespace}/{self.name}"):
                lease: Any = self.coord.read_namespaced_lease(self.name, self.namespace,
                                                              _request_timeout=self.renew_deadline)
                if lease.spec.holder_identity == self.identity:
                    patch = {"metadata": {"resourceVersion": lease.metadata.resource_version},
                             "spec": {"holderIdentity": "", "renewTime": None}}
                    self.coord.patch_namespaced_lease(self.name, self.namespace, patch,
                                                      _request_timeout=self.renew_deadline)
        except KubeError as e:
            log.info("%s", e)  # it expires on its own
