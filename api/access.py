"""What a caller may do through the API and the console: Kubernetes RBAC decides (SPEC §7).

The API acts on the cluster with its own ServiceAccount, which may read and write runs in every namespace it serves;
without this module any valid token reached every namespace (issue 27: a token with no role read another team's
runs, a hook's literal credential included, decided its gate and deleted it). So every call is first put to the API
server as a SubjectAccessReview for the caller's identity and groups (those of its token line, or those a TokenReview
gave), in the namespace asked for, and refused with 403 unless RBAC allows it:

| what | verb and resource (group sympozium.ai) |
|---|---|
| list runs, the console's runs page and its live updates | `list agentruns` |
| read a run, its page, its logs | `get agentruns` |
| create a run / delete a run | `create agentruns` / `delete agentruns` |
| decide a gate (and, later, a tool call) | `approve agentruns` (a verb of our own, as Kubernetes' CSR approvals); the policy's `gatePolicy` then narrows it |
| schedules: list, read, create, edit (pause, resume), delete | `list`, `get`, `create`, `patch`, `delete` `sympoziumschedules` |
| trigger or backfill a schedule | `patch sympoziumschedules` and `create agentruns` (a tick creates runs) |
| the console's Agents and Policies pages | `list`/`get` `agents` (and `sympoziuminstances`), `sympoziumpolicies` |
| the codec routes (a payload does not say whose run it belongs to) | `get agentruns` in every namespace the API serves (cluster-wide when it serves all) |

The chart's ClusterRoles `agentrun-viewer`, `agentrun-editor` and `agentrun-approver` hold exactly these.

Decisions are kept `KEEP_SECONDS` per identity, groups and attributes (at most `MAX_KEPT`), so the console's live
pages cost no review per event, and concurrent identical questions are asked once. A question about one named object
is asked first of the whole namespace: an RBAC rule that answers it without a name has no resourceNames, so it allows
every name, and approving 400 runs one after the other costs one review, not 400; only a caller refused namespace-wide
(a Role limited to some resourceNames) is asked about the name too. A review that cannot be made (the
API server does not answer, or refuses the API `create subjectaccessreviews`) refuses the call with 503: never open.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException
from kubernetes import client

from kube import Kube, KubeError
from models.names import AGENTRUNS, GROUP

from .auth import ANONYMOUS, Caller, with_authenticated

KEEP_SECONDS = 5.0
MAX_KEPT = 10_000
REVIEW_TIMEOUT_SECONDS = 5.0
APPROVE = "approve"


@dataclass(frozen=True)
class Ask:
    """One question: may the caller `verb` `resource` (named `name`) in `namespace` ("" = in all namespaces)?"""

    verb: str
    resource: str
    namespace: str
    name: str = ""
    group: str = GROUP

    def describe(self) -> str:
        what = f'{self.resource} "{self.name}"' if self.name else self.resource
        where = f'in namespace "{self.namespace}"' if self.namespace else "in all namespaces"
        return f"{self.verb} {what} {where}"


class Denied(HTTPException):
    """403: RBAC does not let the caller do it. The JSON API answers it as JSON, the console as a page."""

    def __init__(self, who: Caller, ask: Ask) -> None:
        super().__init__(status_code=403, detail=f'"{who.identity}" may not {ask.describe()} (Kubernetes RBAC: '
                                                 f"{hint(ask)})")
        self.who, self.ask = who, ask


def hint(ask: Ask) -> str:
    """Which of the chart's ClusterRoles grants it."""
    if ask.verb == APPROVE:
        role = "agentrun-approver"
    elif ask.verb in ("get", "list", "watch"):
        role = "agentrun-viewer"
    else:
        role = "agentrun-editor"
    scope = f"a RoleBinding in {ask.namespace}" if ask.namespace else "a ClusterRoleBinding"
    return f"{role} grants it, through {scope}"


Key = tuple[str, tuple[str, ...], str, tuple[tuple[str, tuple[str, ...]], ...], Ask]


class Access:
    """SubjectAccessReviews for the API's callers, their answers kept briefly. `open`: everyone may do everything
    (an --insecure API without tokens, whose every caller is anonymous)."""

    def __init__(self, kube: Kube, *, open: bool = False, clock: Callable[[], float] = time.monotonic,
                 keep_seconds: float = KEEP_SECONDS, max_kept: int = MAX_KEPT) -> None:
        self.kube, self.open, self.clock = kube, open, clock
        self.keep_seconds, self.max_kept = keep_seconds, max_kept
        self._kept: OrderedDict[Key, tuple[bool, float]] = OrderedDict()
        self._asking: dict[Key, asyncio.Future[bool]] = {}
        self.reviews = 0  # SubjectAccessReviews sent (the bench and tests read it)

    async def allowed(self, who: Caller, ask: Ask) -> bool:
        if self.open and who is ANONYMOUS:
            return True
        if ask.name and await self._allowed(who, Ask(ask.verb, ask.resource, ask.namespace, group=ask.group)):
            return True  # allowed namespace-wide: for every name (see the module's docstring)
        return await self._allowed(who, ask)

    async def _allowed(self, who: Caller, ask: Ask) -> bool:
        groups = with_authenticated(who)
        key: Key = (who.identity, groups, who.uid, who.extra, ask)
        kept = self._kept.get(key)
        if kept is not None and kept[1] > self.clock():
            self._kept.move_to_end(key)
            return kept[0]
        asking = self._asking.get(key)
        if asking is not None:
            return await asyncio.shield(asking)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._asking[key] = future
        try:
            allowed = await self._review(who, groups, ask)
        except BaseException as e:
            future.set_exception(e)
            future.exception()
            raise
        finally:
            self._asking.pop(key, None)
        future.set_result(allowed)
        self._kept[key] = (allowed, self.clock() + self.keep_seconds)
        self._kept.move_to_end(key)
        while len(self._kept) > self.max_kept:
            self._kept.popitem(last=False)
        return allowed

    async def require(self, who: Caller, verb: str, resource: str, namespace: str, *, name: str = "") -> None:
        """Raises Denied (403) unless RBAC lets `who` do it; 503 when the cluster cannot say."""
        ask = Ask(verb, resource, namespace, name)
        try:
            ok = await self.allowed(who, ask)
        except (KubeError, TimeoutError) as e:
            raise HTTPException(status_code=503, detail=f"cannot check whether {who.identity!r} may {ask.describe()}: "
                                                        f"{e}", headers={"Retry-After": "5"}) from e
        if not ok:
            raise Denied(who, ask)

    async def namespaces(self, who: Caller, candidates: Iterable[str], *, verb: str = "list",
                         resource: str = AGENTRUNS) -> list[str]:
        """Those of `candidates` in which `who` may `verb` `resource`, sorted (a namespace that cannot be checked is
        left out)."""
        names = sorted(set(candidates))

        async def one(ns: str) -> bool:
            try:
                return await self.allowed(who, Ask(verb, resource, ns))
            except (KubeError, TimeoutError):
                return False

        verdicts = await asyncio.gather(*(one(ns) for ns in names))
        return [ns for ns, ok in zip(names, verdicts, strict=True) if ok]

    async def _review(self, who: Caller, groups: tuple[str, ...], ask: Ask) -> bool:
        attributes: dict[str, Any] = {"verb": ask.verb, "group": ask.group, "resource": ask.resource}
        if ask.namespace:
            attributes["namespace"] = ask.namespace
        if ask.name:
            attributes["name"] = ask.name
        spec: dict[str, Any] = {"user": who.identity, "groups": list(groups), "resourceAttributes": attributes}
        if who.uid:
            spec["uid"] = who.uid
        if who.extra:
            spec["extra"] = {k: list(v) for k, v in who.extra}
        api = client.AuthorizationV1Api(self.kube.api)
        self.reviews += 1
        async with asyncio.timeout(REVIEW_TIMEOUT_SECONDS):
            resp: Any = await self.kube.call(api.create_subject_access_review, {"spec": spec},
                                             _request_timeout=REVIEW_TIMEOUT_SECONDS,
                                             action=f"review whether {who.identity} may {ask.describe()}")
        status = resp.status
        return bool(status is not None and status.allowed and not status.denied)
