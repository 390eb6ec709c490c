"""SkillPack ⇒ its ConfigMap: the bridge's half of skills.

Every SkillPack has one generated ConfigMap of the same name (`<skill>.md` per skill, models/skillpack.py), owned
by it (a controller ownerReference), so Kubernetes' garbage collector removes it with the pack and no finalizer is
needed. The bridge already holds the leader lease and one watch per kind, so this is one more watch rather than
another controller process; an edit of the pack rewrites the ConfigMap, and the agent pods of runs that start
after it mount the new files. A same-named ConfigMap that the pack does not own is never overwritten: the pack's
status says so instead.
"""

from __future__ import annotations

import logging
from typing import Any

from kube import Conflict, Kube, NotFound
from kube.resources import sympozium
from models.base import FieldProblem, parse
from models.names import API_VERSION, LABEL_MANAGED, MANAGED_BY
from models.run import ConditionType, Reason
from models.skillpack import SkillPackSpec, skill_files, skill_pack_notes, skill_pack_warnings
from models.skills import SKILLPACKS

from .conditions import condition

log = logging.getLogger("agentrun.bridge.skillpacks")
LABEL_COMPONENT = "sympozium.ai/component"
LABEL_SKILLPACK = "sympozium.ai/skillpack"


def config_map(obj: dict[str, Any], spec: SkillPackSpec) -> dict[str, Any]:
    m = obj["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": m["name"], "namespace": m["namespace"],
                         "labels": {LABEL_COMPONENT: "skillpack", LABEL_SKILLPACK: m["name"],
                                    LABEL_MANAGED: MANAGED_BY},
                         "ownerReferences": [{"apiVersion": API_VERSION, "kind": "SkillPack", "name": m["name"],
                                              "uid": m["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "data": skill_files(spec)}


class SkillPackSync:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.core = kube.core

    async def on_skill_pack(self, typ: str, obj: dict[str, Any]) -> None:
        m = obj.get("metadata") or {}
        if typ == "DELETED" or m.get("deletionTimestamp") or not (m.get("namespace") and m.get("name") and m.get("uid")):
            return  # the ConfigMap goes with its owner
        name, generation = m["name"], int(m.get("generation") or 1)
        old = list((obj.get("status") or {}).get("conditions") or [])
        try:
            spec = parse(SkillPackSpec, obj.get("spec") or {}, "spec")
        except FieldProblem as p:
            await self._status(obj, {"phase": "Error", "conditions": [
                condition(old, "Ready", "False", reason="InvalidSpec", message=str(p), generation=generation)]})
            return
        problem = await self._apply(config_map(obj, spec), m["uid"])
        conds = [condition(old, "Ready", "True" if problem is None else "False",
                           reason="ConfigMapReady" if problem is None else "ConfigMapConflict",
                           message=problem or f'ConfigMap "{name}" holds {len(spec.skills)} skill file(s)',
                           generation=generation)]
        ignored = skill_pack_warnings(spec)
        if ignored:
            conds.append(condition(old, ConditionType.FIELDS_IGNORED, "True", reason=Reason.NO_EFFECT_HERE,
                                   message="no effect here: " + ", ".join(ignored),
                                   generation=generation))
        for note in skill_pack_notes(spec):
            conds.append(condition(old, ConditionType.ENTRYPOINT_NOT_RUN, "True", reason=Reason.NO_COMMAND,
                                   message=note, generation=generation))
        await self._status(obj, {"phase": "Ready" if problem is None else "Error",
                                 "configMapName": name, "skillCount": len(spec.skills), "conditions": conds})

    async def _apply(self, body: dict[str, Any], uid: str) -> str | None:
        """Create or update the ConfigMap; a problem message if it belongs to someone else."""
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            await self.kube.call(self.core.create_namespaced_config_map, ns, body,
                                 action=f"create ConfigMap {ns}/{name}")
            return None
        except Conflict:
            pass
        existing = await self.kube.call(self.core.read_namespaced_config_map, name, ns,
                                        action=f"read ConfigMap {ns}/{name}")
        if not any(o.uid == uid for o in existing.metadata.owner_references or []):
            return f'ConfigMap "{name}" exists and is not this SkillPack\'s; it was left as it is'
        if (existing.data or {}) == body["data"] and (existing.metadata.labels or {}) == body["metadata"]["labels"]:
            return None
        # A merge patch would keep the keys of skills since removed: `data` is replaced whole (null drops a key).
        data: dict[str, str | None] = {k: None for k in existing.data or {} if k not in body["data"]}
        data.update(body["data"])
        await self.kube.call(self.core.patch_namespaced_config_map, name, ns,
                             {"metadata": {"labels": body["metadata"]["labels"],
                                           "resourceVersion": existing.metadata.resource_version}, "data": data},
                             action=f"update ConfigMap {ns}/{name}")
        return None

    async def _status(self, obj: dict[str, Any], status: dict[str, Any]) -> None:
        m = obj["metadata"]
        current = obj.get("status") or {}
        if all(current.get(k) == v for k, v in status.items() if k != "conditions") and [
                {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in current.get("conditions") or []] == [
                {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status["conditions"]]:
            return  # as it is: writing it again would only wake this watch
        try:
            await sympozium(self.kube, SKILLPACKS).patch_status(
                m["namespace"], m["name"], {"status": status},
                action=f"write status of SkillPack {m['namespace']}/{m['name']}")
        except NotFound:
            pass
