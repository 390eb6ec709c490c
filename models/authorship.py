"""Who wrote an object, as the admission webhook recorded it (issue 27, hole 3; SPEC §1.5).

Every grant (RBAC rules its hooks or sidecars get) and every Secret an object hands its pods is checked against the
identity that authored it, never against the control plane account that happens to write it: a schedule's tick is
created by the worker, a run made through the HTTP API by the API, an Agent stamped from a pack by the bridge. So the
mutating webhook records the author when the object is written, and what the control plane creates from it carries
that record on: the tick's run its schedule's author, the API's run its caller's, the stamped Agent its pack's.

The record is two annotations a person reads in `kubectl get -o yaml`:

    agentrun.dev/author: alice@example.com
    agentrun.dev/author-groups: '["system:authenticated","team-a"]'

(on an AgentRun `agentrun.dev/created-by` and `agentrun.dev/created-by-groups`: who created the run, which never
changes). The groups are a JSON list, as the apiserver authenticated them: a SubjectAccessReview for a user without
their groups would ask about someone else. An Agent's, SkillPack's, schedule's or pack's author is who last wrote what
it grants (`grants` in api/admission.py decides what that is per kind): a write that changes none of it keeps the
stamp. Nobody sets or changes a stamp by hand; only the control plane's own identities may carry one onto what they
create for its author (`TrustedComponents`), and each only onto the kinds it writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .names import ANNOTATION_CREATED_BY

ANNOTATION_CREATED_BY_GROUPS = "agentrun.dev/created-by-groups"
ANNOTATION_AUTHOR = "agentrun.dev/author"
ANNOTATION_AUTHOR_GROUPS = "agentrun.dev/author-groups"

# plural -> (the author annotation, its groups annotation): an AgentRun keeps the creator's name it always had.
KEYS: dict[str, tuple[str, str]] = {
    "agentruns": (ANNOTATION_CREATED_BY, ANNOTATION_CREATED_BY_GROUPS),
    **{p: (ANNOTATION_AUTHOR, ANNOTATION_AUTHOR_GROUPS)
       for p in ("agents", "sympoziuminstances", "skillpacks", "sympoziumschedules", "ensembles", "personapacks")},
}
AUTHORED = tuple(KEYS)


@dataclass(frozen=True)
class Author:
    """A Kubernetes identity as the apiserver authenticated it: the user and its groups."""

    username: str
    groups: tuple[str, ...] = ()

    def annotations(self, plural: str) -> dict[str, str]:
        """The stamp of this author on an object of `plural`."""
        name, groups = KEYS[plural]
        return {name: self.username, groups: json.dumps(list(self.groups), separators=(",", ":"))}


# The stamp a component carries for an author it does not know (a pack written while no webhook recorded one): the
# bridge is nobody's author, so what it stamps out from such a pack records none (`read` gives None) and is checked as
# the bridge, as before authors were recorded; such an Agent's gate hook never decides under gatePolicy approvers.
UNKNOWN = {ANNOTATION_AUTHOR: ""}


def stamp_keys(plural: str) -> tuple[str, str]:
    return KEYS[plural]


def read(plural: str, obj: dict[str, Any] | None) -> Author | None:
    """The author an object of `plural` records; None if it records none. Groups that are not a JSON list of
    strings count as none (a SubjectAccessReview with fewer groups can only allow less)."""
    notes = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    name_key, groups_key = KEYS[plural]
    name = notes.get(name_key)
    if not isinstance(name, str) or not name:
        return None
    try:
        groups = json.loads(notes.get(groups_key) or "[]")
    except (TypeError, ValueError):
        groups = []
    if not (isinstance(groups, list) and all(isinstance(g, str) for g in groups)):
        groups = []
    return Author(name, tuple(groups))


def stamp_of(plural: str, obj: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """The two annotations as written (None where absent), to tell a changed stamp from an unchanged one."""
    notes = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    name_key, groups_key = KEYS[plural]
    return notes.get(name_key), notes.get(groups_key)


class TrustedComponents(BaseModel):
    """The control plane's own Kubernetes users, per component: each may carry an author stamp onto the kinds it
    creates for that author (`CARRIES`); anyone else's stamp is replaced with their own name, or refused."""

    # The API: runs and schedules created for its caller (the token's identity and groups).
    api: list[str] = []
    # The worker: a schedule tick's run (its schedule's author).
    worker: list[str] = []
    # The bridge: the Agents and schedules a PersonaPack or Ensemble stamps out (the pack's author).
    bridge: list[str] = []

    def may_carry(self, user: str, plural: str) -> bool:
        return any(user in getattr(self, component) for component, kinds in CARRIES.items() if plural in kinds)


CARRIES: dict[str, frozenset[str]] = {
    "api": frozenset({"agentruns", "sympoziumschedules"}),
    "worker": frozenset({"agentruns"}),
    "bridge": frozenset({"agents", "sympoziumschedules"}),
}


# What each kind grants or names (RBAC its pods get, Secrets they read, where the provider key goes), as a value to
# compare: a write that changes it makes its writer the author, checked for all of it; any other write keeps the stamp
# and is not checked. A schedule and a pack also hold the tasks their runs get, so everything but pausing and enabling
# counts there: whoever wrote a run's task is who created it, for separation of duties.
_AGENT_DEFAULTS = ("lifecycle", "baseURL", "image", "env", "providerHeadersSecretRef")
_AGENT_SPEC = ("provider", "authRefs", "mcpServers", "observability", "channels", "webEndpoint", "imagePullSecrets",
               "volumes")
_NOT_GRANTS = {"sympoziumschedules": ("suspend",), "ensembles": ("enabled", "excludePersonas"),
               "personapacks": ("enabled", "excludePersonas")}


def grants(plural: str, obj: dict[str, Any] | None) -> Any:
    """The part of an object of `plural` that grants or names something (see above); None for no object."""
    if obj is None:
        return None
    spec = obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    if plural in ("agents", "sympoziuminstances"):
        agents = spec.get("agents")
        default = agents.get("default") if isinstance(agents, dict) else None
        default = default if isinstance(default, dict) else {}
        return {"agents.default": {k: default.get(k) for k in _AGENT_DEFAULTS}, **{k: spec.get(k) for k in _AGENT_SPEC}}
    if plural == "skillpacks":
        return spec.get("sidecar")
    return {k: v for k, v in spec.items() if k not in _NOT_GRANTS.get(plural, ())}
