"""A run's kept logs: the tail of each of its containers' logs, kept in a ConfigMap owned by the run.

A run's pods go with its Jobs when it is cleaned up (the default, `cleanup: delete`), and with them the logs of the
agent and of every hook: yesterday's failure could not be debugged. So the worker's cleanup step reads the last
`AGENTRUN_KEEP_LOG_BYTES` of each container's log (the agent's and each hook's, every attempt) before it deletes the
Jobs, and writes them into the ConfigMap `<run>-logs`, owned by the run: it lives exactly as long as the run (deleting
the run, or history pruning, deletes it) and the API, the CLI and the console read it once the pods are gone.

Why a ConfigMap and not a Secret: it keeps what `pods/log` showed, and Kubernetes' default `view` role reads both
`pods/log` and `configmaps` (not Secrets), so the same people can read a run's logs after its end as during it; a
Secret would hide them from those who could read them live, and the API would need `get secrets` to serve them.
A hook that prints a secret therefore keeps it readable (to `pods/log` readers) for as long as the run exists.

Pure functions: the name, the keys, the cut, the manifest and the reading back; the I/O is the worker's
(activities/kube.py) and the readers' (api/logs.py, cli/runs.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

from .names import API_VERSION, LABEL_COMPONENT, LABEL_MANAGED, LABEL_RUN, LABEL_RUN_UID, MANAGED_BY

# The tail kept of each container's log (AGENTRUN_KEEP_LOG_BYTES); 0 keeps none.
DEFAULT_KEEP_LOG_BYTES = 32 * 1024
# What all of a run's tails may take together: a ConfigMap holds at most 1 MiB, so a run with many hook containers
# and attempts keeps a shorter tail of each rather than none.
MAX_KEPT_BYTES = 768 * 1024
# Lines asked of the API server per container (the cut to bytes is made here): bounds what one read transfers.
TAIL_LINES = 2000
CUT_MARK = "[... the start of this log was not kept]\n"
COMPONENT = "logs"
MAX_NAME = 253


def logs_name(run: str) -> str:
    """The ConfigMap of a run's kept logs: `<run>-logs` (shortened with a hash past an object name's 253)."""
    name = f"{run}-logs"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{run[:MAX_NAME - len('-logs') - len(digest) - 1].rstrip('-.')}-{digest}-logs"


def log_key(job: str, container: str) -> str:
    """The data key of one container's log: `<job>.<container>` (both are DNS labels, so a valid key)."""
    return f"{job}.{container}"


def tail(text: str, limit: int) -> str:
    """The end of `text` in at most `limit` bytes of UTF-8, from a line's start when one is near, marked as cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    keep = data[len(data) - max(0, limit - len(CUT_MARK.encode())):]
    newline = keep.find(b"\n")
    if 0 <= newline < len(keep) // 4:  # start at a whole line when that loses little
        keep = keep[newline + 1:]
    return CUT_MARK + keep.decode(errors="ignore")


def per_container(count: int, limit: int) -> int:
    """Bytes kept of each of `count` containers' logs: `limit`, less when they would not fit together."""
    return min(limit, MAX_KEPT_BYTES // max(count, 1))


def manifest(*, namespace: str, run: str, uid: str, logs: dict[str, str]) -> dict[str, Any]:
    """The ConfigMap: owned by the run (not blocking its deletion: nothing waits for it), labelled as the run's."""
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": logs_name(run), "namespace": namespace,
                     "labels": {LABEL_RUN: run, LABEL_RUN_UID: uid, LABEL_COMPONENT: COMPONENT,
                                LABEL_MANAGED: MANAGED_BY},
                     "ownerReferences": [{"apiVersion": API_VERSION, "kind": "AgentRun", "name": run, "uid": uid}]},
        "data": logs,
    }


def kept_log(configmap: dict[str, Any] | None, *, run_uid: str, job: str, container: str) -> str | None:
    """The kept log of one container, from the run's ConfigMap as read; None when there is none, or when the
    ConfigMap is not this run's (a same-named one of an earlier run, or of someone else)."""
    if not configmap:
        return None
    owners = (configmap.get("metadata") or {}).get("ownerReferences") or []
    if not any(o.get("uid") == run_uid for o in owners):
        return None
    value = (configmap.get("data") or {}).get(log_key(job, container))
    return value if isinstance(value, str) else None


__all__ = ["CUT_MARK", "DEFAULT_KEEP_LOG_BYTES", "MAX_KEPT_BYTES", "TAIL_LINES", "kept_log", "log_key", "logs_name",
           "manifest", "per_container", "tail"]
