"""PersonaPack / Ensemble ⇒ the Agents and SympoziumSchedules they describe: the bridge's half of packs.

Every event of a pack (read afresh) and every resync makes the cluster match `models.personas.expand` of it:
missing objects are created; objects whose pack changed, or that were edited behind the pack's back (the pack is
their source of truth, as in Sympozium; only a schedule's `suspend` is kept), are replaced with their
resourceVersion, so a concurrent writer makes the write fail and it is done again; objects the pack owns but no
longer describes are deleted. A disabled pack owns nothing. A deleted pack needs nothing from the bridge: it is the controller owner of what it
stamped, so Kubernetes' garbage collector removes those objects (and a schedule's own finalizer still lets the
bridge delete its Temporal Schedule first). The pack's status subresource lists what was stamped out.

An object of the same name the pack does not own (a user's own Agent) is never touched, and a write the API
server refuses (a schema or an admission webhook) is not repeated blindly: that persona fails and the pack's status
says why (phase Error, its Ready condition's message).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kube import BadRequest, Conflict, Forbidden, Invalid, Kube, NotFound
from kube.resources import sympozium
from models.base import FieldProblem
from models.ensemble import InstalledPersona
from models.names import AGENTS, SCHEDULES
from models.personas import (
    ANNOTATION_STAMPED,
    ANNOTATION_STORED,
    PLURALS,
    Pack,
    PackKind,
    expand,
    ignored_fields,
    owned_by,
    pack_selector,
    read_pack,
    stamped_hash,
)
from models.run import ConditionType, Reason

from .conditions import condition

log = logging.getLogger("agentrun.bridge.personas")

Obj = dict[str, Any]


# What the API server (or an admission webhook) says no to: repeating the same write will not help, so the pack's
# status says why and the next edit or resync tries again.
REFUSED = (BadRequest, Forbidden, Invalid)


def out_of_date(have: Obj, want: Obj) -> bool:
    """The pack changed since `have` was written (or it was never noted as written), or someone else changed it."""
    notes = have["metadata"].get("annotations") or {}
    if notes.get(ANNOTATION_STAMPED) != want["metadata"]["annotations"][ANNOTATION_STAMPED]:
        return True
    return notes.get(ANNOTATION_STORED) != stamped_hash(have, list(want["metadata"]["labels"]))


class Terminating(Exception):
    """A stamped object the pack still describes is being deleted: the event is handled again later."""


class PackSync:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        # Every live pack (uid → kind, namespace, name), for the periodic resync: the bridge does not watch the
        # objects it stamps, so one deleted or replaced behind its back is put right within a resync interval.
        self._packs: dict[str, tuple[PackKind, str, str]] = {}
        # One reconcile of a pack at a time (an event's and the resync's would otherwise interleave).
        self._locks: dict[str, asyncio.Lock] = {}

    async def resync(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            for uid, (kind, ns, name) in list(self._packs.items()):
                try:
                    await self._reconcile(kind, uid, ns, name)
                except Exception as e:  # one pack's failure must not stop the others' resync
                    log.warning("resync of %s %s/%s failed: %s", kind, ns, name, e)

    async def on_ensemble(self, typ: str, obj: Obj) -> None:
        await self._on_pack("Ensemble", typ, obj)

    async def on_personapack(self, typ: str, obj: Obj) -> None:
        await self._on_pack("PersonaPack", typ, obj)

    async def _on_pack(self, kind: PackKind, typ: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        uid, ns, name = meta.get("uid"), meta.get("namespace"), meta.get("name")
        if not (uid and ns and name):
            return
        if typ == "DELETED" or meta.get("deletionTimestamp"):
            self._packs.pop(uid, None)
            self._locks.pop(uid, None)
            return  # the garbage collector deletes what it owned
        self._packs[uid] = (kind, ns, name)
        await self._reconcile(kind, uid, ns, name)

    async def _reconcile(self, kind: PackKind, uid: str, ns: str, name: str) -> None:
        """Stamp out the pack as it is now: read afresh, so an event retried late (or the resync) never acts on
        an older version than one already handled."""
        async with self._locks.setdefault(uid, asyncio.Lock()):
            try:
                obj: Obj = await sympozium(self.kube, PLURALS[kind]).get(
                    ns, name, action=f"read {kind} {ns}/{name}")
            except NotFound:
                return
            if obj["metadata"].get("uid") != uid or obj["metadata"].get("deletionTimestamp"):
                return  # deleted (and maybe recreated: the new one has its own events)
            await self._stamp(kind, obj)

    async def _stamp(self, kind: PackKind, obj: Obj) -> None:
        meta = obj["metadata"]
        try:
            pack = read_pack(kind, obj)
            stamp = expand(pack)
        except FieldProblem as p:
            # What it stamped before stays (and stays listed): a typo in an edit should not delete a team of agents.
            kept = [InstalledPersona.model_validate(i) for i in (obj.get("status") or {}).get("installedPersonas") or []]
            await self._write_status(kind, obj, phase="Error", reason="InvalidSpec", message=str(p), installed=kept)
            log.info("%s %s/%s is invalid: %s", kind, meta["namespace"], meta["name"], p)
            return
        problems: dict[str, str] = {}  # object name → why it is not as the pack wants it
        for plural, desired in ((AGENTS, stamp.agents), (SCHEDULES, stamp.schedules)):
            problems.update(await self._converge(pack, plural, desired))
        failed = set(problems)
        installed = [i for i in stamp.installed
                     if i.instance_name not in failed and (i.schedule_name or "") not in failed]
        if problems:
            phase, reason, message = "Error", "StampFailed", "; ".join(problems.values())
        elif pack.spec.enabled:
            phase, reason, message = "Ready", "Stamped", (f"{len(stamp.agents)} Agents and {len(stamp.schedules)} "
                                                          "SympoziumSchedules stamped out")
        else:
            phase, reason, message = "Inactive", "NotEnabled", "spec.enabled is false: nothing is stamped out"
        await self._write_status(kind, obj, phase=phase, reason=reason, message=message, installed=installed,
                                 ignored=ignored_fields(pack))

    async def _converge(self, pack: Pack, plural: str, desired: list[Obj]) -> dict[str, str]:
        """Make `pack`'s objects of one plural exactly `desired`; a problem per object that could not be."""
        ns, what = pack.namespace, f"{pack.kind} {pack.namespace}/{pack.name}"
        listed = await sympozium(self.kube, plural).list(ns, label_selector=pack_selector(pack),
                                                         action=f"list {plural} of {what}")
        existing = {o["metadata"]["name"]: o for o in listed.get("items") or [] if owned_by(o, pack)}
        problems: dict[str, str] = {}
        for want in desired:
            name = want["metadata"]["name"]
            have = existing.pop(name, None)
            if have is not None and have["metadata"].get("deletionTimestamp"):
                # Still going (a schedule's finalizer): it is created anew once it is gone, when this is retried.
                raise Terminating(f"{plural} {ns}/{name} is being deleted; {what} is handled again when it is gone")
            if have is None:
                problem = await self._create(plural, pack, want)
                if problem:
                    problems[name] = problem
            elif out_of_date(have, want):
                problem = await self._replace(plural, have, want)
                if problem:
                    problems[name] = problem
        for name, gone in existing.items():
            if gone["metadata"].get("deletionTimestamp"):
                continue
            try:
                await sympozium(self.kube, plural).delete(
                    ns, name, body={"preconditions": {"uid": gone["metadata"]["uid"]}},
                    action=f"delete {plural} {ns}/{name} no longer in {what}")
                log.info("deleted %s %s/%s (no longer in %s)", plural, ns, name, what)
            except (NotFound, Conflict):
                pass  # gone already, or replaced by a new object of that name: not ours to delete
        return problems

    async def _create(self, plural: str, pack: Pack, want: Obj) -> str | None:
        ns, name = pack.namespace, want["metadata"]["name"]
        try:
            stored = await sympozium(self.kube, plural).create(
                ns, want, action=f"create {plural} {ns}/{name} for {pack.kind} {pack.name}")
            log.info("stamped out %s %s/%s for %s %s", plural, ns, name, pack.kind, pack.name)
            await self._record_stored(plural, stored, want)
            return None
        except REFUSED as e:
            return f"{name} was refused: {e.message}"
        except Conflict as e:
            if not e.already_exists:
                raise
        other = await sympozium(self.kube, plural).get(ns, name, action=f"read {plural} {ns}/{name}")
        if owned_by(other, pack):
            raise Conflict(f"create {plural} {ns}/{name}", "created meanwhile; handling the pack again")
        return f"{name} exists already and is not owned by {pack.kind} {pack.name}: it was left as it is"

    async def _replace(self, plural: str, have: Obj, want: Obj) -> str | None:
        meta = have["metadata"]
        spec = dict(want["spec"])
        if plural == SCHEDULES and "suspend" in (have.get("spec") or {}):
            # Not expressible on the pack: someone paused it on purpose, and an edit must not resume it.
            spec["suspend"] = have["spec"]["suspend"]
        body = {**have, "spec": spec, "metadata": {
            **meta, "labels": {**(meta.get("labels") or {}), **want["metadata"]["labels"]},
            "annotations": {**(meta.get("annotations") or {}), **want["metadata"]["annotations"]}}}
        try:
            stored = await sympozium(self.kube, plural).replace(
                meta["namespace"], meta["name"], body,
                action=f"update {plural} {meta['namespace']}/{meta['name']}")
        except REFUSED as e:
            return f"{meta['name']} was refused: {e.message}"
        log.info("updated %s %s/%s to match its pack", plural, meta["namespace"], meta["name"])
        await self._record_stored(plural, stored, want)
        return None

    async def _record_stored(self, plural: str, stored: Obj, want: Obj) -> None:
        """Note what the cluster kept of our write (its schema may prune fields), to see later edits by others.

        Only if the object is still as written (resourceVersion): otherwise another writer's version would be
        recorded as ours; without the note the next reconcile rewrites the object and notes it then."""
        meta = stored["metadata"]
        note = {ANNOTATION_STORED: stamped_hash(stored, list(want["metadata"]["labels"]))}
        if (meta.get("annotations") or {}).get(ANNOTATION_STORED) == note[ANNOTATION_STORED]:
            return  # kept whole (the usual case): the note written with it holds
        try:
            await sympozium(self.kube, plural).patch(
                meta["namespace"], meta["name"],
                {"metadata": {"resourceVersion": meta["resourceVersion"], "annotations": note}},
                action=f"annotate {plural} {meta['namespace']}/{meta['name']}")
        except (NotFound, Conflict):
            pass
        except REFUSED as e:  # the object is as the pack wants it; without the note it is only rewritten again
            log.warning("%s", e)

    async def _write_status(self, kind: PackKind, obj: Obj, *, phase: str, reason: str, message: str,
                            installed: list[InstalledPersona], ignored: list[str] | None = None) -> None:
        meta, current = obj["metadata"], obj.get("status") or {}
        spec = obj.get("spec") or {}
        personas = spec.get("agentConfigs" if kind == "Ensemble" else "personas") or []
        generation = int(meta.get("generation") or 1)
        ready = "True" if phase in ("Ready", "Inactive") else "False"
        old = current.get("conditions") or []
        conditions = [condition(old, "Ready", ready, reason=reason, message=message, generation=generation)]
        if ignored:
            # Named as on runs: Sympozium settings accepted that do nothing here.
            conditions.append(condition(old, ConditionType.FIELDS_IGNORED, "True", reason=Reason.NO_EFFECT_HERE,
                                        message="no effect here: " + ", ".join(ignored), generation=generation))
        status: Obj = {"phase": phase, "personaCount": len(personas) if isinstance(personas, list) else 0,
                       "installedCount": len(installed),
                       "installedPersonas": [i.wire() for i in installed], "conditions": conditions}
        if all(current.get(k) == v for k, v in status.items()):
            return  # our own status write comes back as an event: nothing changed, nothing to write
        try:
            await sympozium(self.kube, PLURALS[kind]).patch_status(
                meta["namespace"], meta["name"], {"status": status},
                action=f"write status of {kind} {meta['namespace']}/{meta['name']}")
        except NotFound:
            pass  # deleted meanwhile
