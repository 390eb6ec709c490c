"""What a run costs the Kubernetes API, request by request, and that the cheap ways stay exact.

A run with a preRun hook, the agent and a postRun hook asks the API server only for what it must:
no read of the run before its finalizer (the bridge saw the object), none of its Agent (the
worker's view holds it), no pod lists (the view of pods), no log read for the preRun outcome (its
termination message), one request for all its Jobs at cleanup and no read before deleting its
workspace or releasing the object. The cleanup reads each container's log once more, to keep its tail in the run's
ConfigMap (one create) before the pods go."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from kubernetes import client

from activities import manifests as mf
from activities.kube import KubeActivities
from localkube.testing import Handle
from models.agentrun import AgentRunStatus
from models.names import RUN_FINALIZER
from models.resolve import RunRef, resolve_run
from models.run import Phase, StatusUpdate
from models.steps import CleanUp, JobRef, StartRun, StatusChange
from tests.activities.test_manifests import AGENT
from tests.conftest import AUDIT_LOG
from tests.e2e.conftest import Stack, agent, agent_run, hook
from tests.waiting import wait_for


def requests_of(localkube: Handle, ns: str, since: int, who: str) -> Counter[str]:
    """`METHOD kind[/sub]` (a name becomes `{name}`) of every non-watch request `who` made in `ns`."""
    lines = (localkube.state_dir / AUDIT_LOG).read_text().splitlines()[since:]
    out: Counter[str] = Counter()
    for line in lines:
        r = json.loads(line)
        marker = f"/namespaces/{ns}/"
        if r["watch"] or who not in r["userAgent"] or marker not in r["path"]:
            continue
        parts = r["path"].split(marker, 1)[1].split("/")
        shape = "/".join([parts[0], *(["{name}"] if len(parts) > 1 else []), *parts[2:]])
        out[f"{r['method']} {shape}"] += 1
    return out


def audit_lines(localkube: Handle) -> int:
    path: Path = localkube.state_dir / AUDIT_LOG
    return len(path.read_text().splitlines())


def test_a_run_with_hooks_costs_the_worker_seventeen_requests(stack: Stack, namespace: str) -> None:
    ns, lk = namespace, stack.kube
    stack.create(ns, "agents", agent())
    since = audit_lines(lk)
    stack.create(ns, "agentruns", agent_run("first"))
    assert stack.wait_phase(ns, "first")["status"]["phase"] == "Succeeded"
    wait_for(lambda: requests_of(lk, ns, since, "worker")["PATCH agentruns/{name}"] == 2, timeout=30,
             what="the first run released")
    first = requests_of(lk, ns, since, "worker")
    assert first["POST serviceaccounts"] == 1, "the namespace's agent account is made with its first run"
    assert first["GET agents/{name}"] <= 1, "read unless the worker's view already held the Agent"

    since = audit_lines(lk)
    stack.create(ns, "agentruns", agent_run("cheap", lifecycle={"preRun": [hook("pre", "true")],
                                                                "postRun": [hook("post", "true")]}))
    assert stack.wait_phase(ns, "cheap")["status"]["phase"] == "Succeeded"
    wait_for(lambda: requests_of(lk, ns, since, "worker")["PATCH agentruns/{name}"] == 2, timeout=30,
             what="cleanup to release the run")
    assert requests_of(lk, ns, since, "worker") == Counter({
        "PATCH agentruns/{name}": 2,  # finalizer on (the version the bridge saw: no read first), off
        "PATCH agentruns/{name}/status": 4,  # Pending, Running, PostRunning, Succeeded
        "POST persistentvolumeclaims": 1,
        "POST jobs": 3,
        "GET pods/{name}/log": 1 + 3,  # the agent's result (the preRun's answer is its termination message); at
                                       # cleanup, the tail of each of its three containers' logs ...
        "POST configmaps": 1,  # ... kept in the run's ConfigMap <run>-logs
        "DELETE jobs": 1,  # all three, by the run-uid label
        "DELETE persistentvolumeclaims/{name}": 1,  # its uid known: no read first
    }), "no read of the run, its Agent (the worker's view) or pods; the agent account made a moment ago"


def _labelled_job(run: Any, name: str, uid_label: str | None) -> dict[str, Any]:
    body = mf.agent_job(run, workflow_id="")
    body["metadata"]["name"] = name
    del body["metadata"]["ownerReferences"]  # no such run object here: the garbage collector would take them
    if uid_label is None:
        body["metadata"]["labels"].pop("agentrun.dev/run-uid")
    else:
        body["metadata"]["labels"]["agentrun.dev/run-uid"] = uid_label
    body["spec"]["template"]["spec"]["containers"][0]["command"] = ["true"]
    return body


async def test_cleanup_removes_exactly_the_runs_objects_and_keeps_a_same_named_runs(
        stack: Stack, namespace: str) -> None:
    ns = namespace
    acts = KubeActivities(stack.api, default_image="agent:dev")
    batch: Any = client.BatchV1Api(stack.api)
    core: Any = client.CoreV1Api(stack.api)
    obj = {"metadata": {"name": "gone", "namespace": ns, "uid": "uid-ours"},
           "spec": {"agentRef": "helper", "task": "do", "lifecycle": {"postRun": [{"name": "p", "image": "x"}]}}}
    ours = resolve_run(obj, AGENT, default_image="agent:1")
    # Ours: two Jobs with the run-uid label, one made before that label existed; the workspace.
    j1 = batch.create_namespaced_job(ns, _labelled_job(ours, "gone", "uid-ours"))
    j2 = batch.create_namespaced_job(ns, _labelled_job(ours, "gone-postrun", "uid-ours"))
    j3 = batch.create_namespaced_job(ns, _labelled_job(ours, "gone-prerun", None))
    # A newer run of the same name owns another Job, and a workspace of that name is not ours.
    other = batch.create_namespaced_job(ns, _labelled_job(ours, "gone-other", "uid-newer"))
    pvc = mf.workspace_pvc(ours)
    del pvc["metadata"]["ownerReferences"]
    theirs = core.create_namespaced_persistent_volume_claim(ns, pvc)

    refs = [JobRef(namespace=ns, name=j.metadata.name, uid=j.metadata.uid, component="agent-run",
                   labelled=j is not j3) for j in (j1, j2, j3)]
    await acts.clean_up(CleanUp(ref=RunRef(namespace=ns, name="gone", uid="uid-ours"), run=ours, jobs=refs,
                                workspace_uid="uid-of-our-workspace-long-gone"))

    def names() -> set[str]:
        return {j.metadata.name for j in batch.list_namespaced_job(ns).items if not j.metadata.deletion_timestamp}
    wait_for(lambda: names() == {"gone-other"}, timeout=30, what="only the newer run's Job left")
    assert batch.read_namespaced_job("gone-other", ns).metadata.uid == other.metadata.uid
    still = core.read_namespaced_persistent_volume_claim(pvc["metadata"]["name"], ns)
    assert still.metadata.uid == theirs.metadata.uid and not still.metadata.deletion_timestamp, \
        "a workspace of another uid is not deleted"


async def test_release_with_another_finalizer_removes_only_ours(stack: Stack, namespace: str) -> None:
    ns, custom = namespace, stack.custom
    made = stack.create(ns, "agentruns", agent_run("held", agent_ref="nobody"))  # fails at once: no such Agent
    stack.wait_phase(ns, "held")
    wait_for(lambda: not (stack.get_run(ns, "held") or {})["metadata"].get("finalizers"), timeout=30,
             what="the run's own cleanup to release it")
    custom.patch_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", "held",
                                          {"metadata": {"finalizers": ["example.com/keep", RUN_FINALIZER]}})
    acts = KubeActivities(stack.api, default_image="agent:dev")
    await acts.clean_up(CleanUp(ref=RunRef(namespace=ns, name="held", uid=made["metadata"]["uid"])))
    assert (stack.get_run(ns, "held") or {})["metadata"]["finalizers"] == ["example.com/keep"]
    custom.patch_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", "held",
                                          {"metadata": {"finalizers": [RUN_FINALIZER]}})
    await acts.clean_up(CleanUp(ref=RunRef(namespace=ns, name="held", uid="another-object")))
    assert (stack.get_run(ns, "held") or {})["metadata"]["finalizers"] == [RUN_FINALIZER], \
        "another object's finalizer is left alone"
    await acts.clean_up(CleanUp(ref=RunRef(namespace=ns, name="held", uid=made["metadata"]["uid"])))
    assert not (stack.get_run(ns, "held") or {})["metadata"].get("finalizers")


async def test_cleanup_writes_the_final_status_first_and_cleans_up_when_it_cannot(
        stack: Stack, namespace: str) -> None:
    ns = namespace
    made = stack.create(ns, "agentruns", agent_run("ending", agent_ref="nobody"))  # fails at once: no such Agent
    stack.wait_phase(ns, "ending")
    wait_for(lambda: not (stack.get_run(ns, "ending") or {})["metadata"].get("finalizers"), timeout=30,
             what="the run's own cleanup to release it")
    stack.custom.patch_namespaced_custom_object("sympozium.ai", "v1alpha1", ns, "agentruns", "ending",
                                                {"metadata": {"finalizers": [RUN_FINALIZER]}})
    acts = KubeActivities(stack.api, default_image="agent:dev")
    ref = RunRef(namespace=ns, name="ending", uid=made["metadata"]["uid"])
    final = StatusChange(ref=ref, update=StatusUpdate(status=AgentRunStatus(phase=Phase.SUCCEEDED, result="final")))
    published = await acts.clean_up(CleanUp(ref=ref, final=final))
    assert published is not None and published.unpublished == []
    run = stack.get_run(ns, "ending") or {}
    assert run["status"]["result"] == "final" and not run["metadata"].get("finalizers")

    # A final status that cannot be written for good (the object is gone) leaves the cleanup to go on.
    obj = {"metadata": {"name": "vanished", "namespace": ns, "uid": "uid-vanished"},
           "spec": {"agentRef": "helper", "task": "do"}}
    gone = resolve_run(obj, AGENT, default_image="agent:1")
    batch: Any = client.BatchV1Api(stack.api)
    job = batch.create_namespaced_job(ns, _labelled_job(gone, "vanished", "uid-vanished"))
    ref = RunRef(namespace=ns, name="vanished", uid="uid-vanished")
    final = StatusChange(ref=ref, update=StatusUpdate(status=AgentRunStatus(phase=Phase.SUCCEEDED)))
    await acts.clean_up(CleanUp(ref=ref, run=gone, final=final, jobs=[JobRef(
        namespace=ns, name="vanished", uid=job.metadata.uid, component="agent-run", labelled=True)]))
    wait_for(lambda: not [j for j in batch.list_namespaced_job(ns).items if j.metadata.name == "vanished"
                          and not j.metadata.deletion_timestamp], timeout=30, what="the vanished run's Job deleted")


async def test_a_stale_version_from_the_bridge_falls_back_to_reading_the_run(stack: Stack, namespace: str) -> None:
    ns = namespace
    made = stack.create(ns, "agentruns", agent_run("stale", agent_ref="nobody"))  # fails at once: no such Agent
    stack.wait_phase(ns, "stale")
    wait_for(lambda: not (stack.get_run(ns, "stale") or {})["metadata"].get("finalizers"), timeout=30,
             what="the run's own cleanup to release it")
    ref = RunRef(namespace=ns, name="stale", uid=made["metadata"]["uid"])
    acts = KubeActivities(stack.api, default_image="agent:dev")
    # The version seen at creation is long gone (status writes, finalizer on and off): the patch that
    # carries it is refused, and the step reads the run and adds the finalizer the careful way.
    res = await acts.resolve_run(StartRun(ref=ref, resource_version=made["metadata"]["resourceVersion"]))
    assert res.problem is not None and "nobody" in res.problem
    assert (stack.get_run(ns, "stale") or {})["metadata"]["finalizers"] == [RUN_FINALIZER]
    await acts.clean_up(CleanUp(ref=ref))
    assert not (stack.get_run(ns, "stale") or {})["metadata"].get("finalizers")
