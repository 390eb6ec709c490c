"""The contract with the real `kubectl`: what a person typing kubectl commands sees from localkube.

Every test runs the real kubectl binary as a subprocess against the session's localkube and asserts
on what it prints, its exit code, and the objects it leaves behind (read back with the `kubernetes`
client). Where kubectl's output depends on the server (tables, describe, errors, watch streams),
the expected text is the one a real kube-apiserver makes kubectl print.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from localkube import discovery
from localkube.testing import Handle
from tests.conftest import Kubectl
from tests.waiting import wait_for

BUSYBOX = "busybox:1.36"
KUBECTL = str(Path(sys.executable).parent / "kubectl")
Obj = dict[str, Any]


# --------------------------------------------------------------------------------------------------
# builders and helpers
# --------------------------------------------------------------------------------------------------


def manifest(*objs: Obj) -> str:
    """A stream of documents for `-f -`, as JSON (no YAML 1.1 surprises such as `n` meaning false)."""
    return "\n---\n".join(json.dumps(o) for o in objs)


def configmap(name: str, data: dict[str, str], *, labels: dict[str, str] | None = None) -> Obj:
    md: Obj = {"name": name}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data}


def job(name: str, script: str, *, labels: dict[str, str] | None = None, backoff_limit: int = 0) -> Obj:
    """A Job running `script` under busybox's sh once; its pod carries `labels` and `app: <name>`."""
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {"labels": {"app": name, **(labels or {})}},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": BUSYBOX, "command": ["sh", "-c", script]}]},
            },
        },
    }


def gated_job(name: str, ctl: Path, before: str, after: str) -> Obj:
    """A Job that runs `before`, waits until the test creates `ctl/go` (ctl is mounted at /ctl), then `after`."""
    spec = job(name, f"{before}; while [ ! -e /ctl/go ]; do sleep 0.05; done; {after}")
    pod_spec = spec["spec"]["template"]["spec"]
    pod_spec["volumes"] = [{"name": "ctl", "hostPath": {"path": str(ctl)}}]
    pod_spec["containers"][0]["volumeMounts"] = [{"name": "ctl", "mountPath": "/ctl"}]
    return spec


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl failed ({result.returncode}): {result.stderr}"
    return result.stdout


def table(text: str) -> list[list[str]]:
    """kubectl's column output as rows of cells (header first); cells are separated by 2+ spaces."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


def rows_by_name(text: str) -> dict[str, dict[str, str]]:
    header, *rows = table(text)
    return {row[header.index("NAME")]: dict(zip(header, row, strict=False)) for row in rows}


def plain(kube: client.ApiClient, obj: Any) -> Any:
    """A client model as the plain JSON the server sent."""
    return kube.sanitize_for_serialization(obj)


def read(kube: client.ApiClient, kind: str, namespace: str, name: str) -> Obj:
    readers: dict[str, Callable[[str, str], Any]] = {
        "configmap": client.CoreV1Api(kube).read_namespaced_config_map,
        "pod": client.CoreV1Api(kube).read_namespaced_pod,
        "job": client.BatchV1Api(kube).read_namespaced_job,
    }
    obj: Obj = plain(kube, readers[kind](name, namespace))
    return obj


def pods_of(kube: client.ApiClient, namespace: str, job_name: str) -> list[Obj]:
    pods = client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector=f"job-name={job_name}")
    return list(plain(kube, pods)["items"])


def job_done(kube: client.ApiClient, namespace: str, name: str) -> Callable[[], bool]:
    """A probe: the Job has its terminal condition (Complete or Failed)."""
    def probe() -> bool:
        conditions = (read(kube, "job", namespace, name).get("status") or {}).get("conditions") or []
        return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)

    return probe


class Streamer:
    """A long-running kubectl (`get -w`, `logs -f`) whose stdout lines are collected as they arrive."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([KUBECTL, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, predicate: Callable[[str], bool], what: str, timeout: float = 20) -> str:
        return wait_for(lambda: next((ln for ln in list(self.lines) if predicate(ln)), None), timeout=timeout,
                        what=f"{what}; got {self.lines}")

    def stop(self) -> None:
        """Terminate (if still running) and collect every line it printed."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def kubectl_env(localkube: Handle, tmp_path: Path) -> dict[str, str]:
    """The environment for a kubectl started with Popen (streams), with its own discovery cache."""
    return {**os.environ, "KUBECONFIG": str(localkube.kubeconfig), "HOME": str(tmp_path)}


@contextmanager
def streaming(args: list[str], env: dict[str, str]) -> Iterator[Streamer]:
    s = Streamer(args, env)
    try:
        yield s
    finally:
        s.stop()



def crd(group: str, *, columns: bool = True) -> Obj:
    version: Obj = {
        "name": "v1", "served": True, "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1}, "color": {"type": "string"}}},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
        }}},
        "subresources": {"status": {}},
    }
    if columns:
        version["additionalPrinterColumns"] = [
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "priority": 1},
        ]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wdg"]},
                     "versions": [version]}}


@pytest.fixture
def widget_group(kubectl: Kubectl) -> Iterator[str]:
    """A CRD group unique to the test; its CRD (if the test created one) is deleted afterwards."""
    group = f"t{uuid.uuid4().hex[:8]}.example.com"
    yield group
    kubectl("delete", "crd", f"widgets.{group}", "--ignore-not-found", "--wait=false")


# --------------------------------------------------------------------------------------------------
# get / list
# --------------------------------------------------------------------------------------------------


def test_get_prints_the_server_side_table_of_the_kind(kubectl: Kubectl, namespace: str) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("cfg", {"a": "1", "b": "2"}))))
    out = ok(kubectl("get", "configmaps", "-n", namespace))
    assert table(out)[0] == ["NAME", "DATA", "AGE"]
    assert rows_by_name(out)["cfg"]["DATA"] == "2"


def test_get_o_json_and_o_yaml_return_the_stored_object(kubectl: Kubectl, namespace: str,
                                                         kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("cfg", {"k": "v"}))))
    stored = read(kube, "configmap", namespace, "cfg")
    as_json = json.loads(ok(kubectl("get", "configmap", "cfg", "-n", namespace, "-o", "json")))
    as_yaml = yaml.safe_load(ok(kubectl("get", "configmap", "cfg", "-n", namespace, "-o", "yaml")))
    for obj in (as_json, as_yaml):
        assert obj["kind"] == "ConfigMap" and obj["apiVersion"] == "v1"
        assert obj["data"] == {"k": "v"}
        assert obj["metadata"]["uid"] == stored["metadata"]["uid"]
        assert obj["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


def test_get_o_json_of_a_list_is_a_v1_list(kubectl: Kubectl, namespace: str) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("one", {}), configmap("two", {}))))
    out = json.loads(ok(kubectl("get", "configmaps", "-n", namespace, "-o", "json")))
    assert out["kind"] == "List"
    assert {"one", "two"} <= {i["metadata"]["name"] for i in out["items"]}
    assert all(i["kind"] == "ConfigMap" for i in out["items"])


def test_get_jsonpath_extracts_fields(kubectl: Kubectl, namespace: str) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-",
               input=manifest(configmap("a", {"k": "1"}), configmap("b", {"k": "2"}))))
    assert ok(kubectl("get", "cm", "a", "-n", namespace, "-o", "jsonpath={.data.k}")) == "1"
    names = ok(kubectl("get", "cm", "-n", namespace, "-o", "jsonpath={range .items[*]}{.metadata.name}{'\\n'}{end}"))
    assert {"a", "b"} <= set(names.split())


def test_get_o_name_prints_resource_slash_name(kubectl: Kubectl, namespace: str) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("cfg", {}))))
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(job("quick", "true"))))
    assert ok(kubectl("get", "cm", "cfg", "-n", namespace, "-o", "name")).split() == ["configmap/cfg"]
    assert ok(kubectl("get", "jobs", "-n", namespace, "-o", "name")).split() == ["job.batch/quick"]


def test_get_o_wide_adds_the_priority_columns_of_pods_and_jobs(kubectl: Kubectl, namespace: str,
                                                                kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(job("wide", "echo hi"))))
    wait_for(job_done(kube, namespace, "wide"), what="job wide to finish")
    pods = table(ok(kubectl("get", "pods", "-n", namespace, "-o", "wide")))
    assert pods[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
                       "READINESS GATES"]
    assert pods[1][2] == "Completed" and pods[1][6] == "localkube"
    narrow = table(ok(kubectl("get", "pods", "-n", namespace)))
    assert narrow[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    jobs = rows_by_name(ok(kubectl("get", "jobs", "-n", namespace, "-o", "wide")))
    assert jobs["wide"]["STATUS"] == "Complete"
    assert jobs["wide"]["COMPLETIONS"] == "1/1"
    assert jobs["wide"]["CONTAINERS"] == "main"
    assert jobs["wide"]["IMAGES"] == BUSYBOX
    assert jobs["wide"]["SELECTOR"].startswith("batch.kubernetes.io/controller-uid=")


def test_label_selectors_filter_what_get_lists(kubectl: Kubectl, namespace: str) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(
        configmap("red", {}, labels={"color": "red", "tier": "a"}),
        configmap("blue", {}, labels={"color": "blue"}),
        configmap("plain", {}))))

    def names(selector: str) -> set[str]:
        out = ok(kubectl("get", "cm", "-n", namespace, "-l", selector, "-o", "name"))
        return {n.removeprefix("configmap/") for n in out.split()}

    assert names("color=red") == {"red"}
    assert names("color in (red,blue)") == {"red", "blue"}
    assert names("color,!tier") == {"blue"}
    assert names("color!=red") >= {"blue", "plain"} and "red" not in names("color!=red")
    empty = kubectl("get", "cm", "-n", namespace, "-l", "color=green")
    assert empty.returncode == 0
    assert f"No resources found in {namespace} namespace." in empty.stderr


def test_field_selectors_filter_what_get_lists(kubectl: Kubectl, namespace: str, kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-",
               input=manifest(job("good", "true"), job("bad", "exit 3"), configmap("cm-x", {}), configmap("cm-y", {}))))
    wait_for(job_done(kube, namespace, "good"), what="job good to finish")
    wait_for(job_done(kube, namespace, "bad"), what="job bad to fail")
    by_name = ok(kubectl("get", "cm", "-n", namespace, "--field-selector", "metadata.name=cm-x", "-o", "name"))
    assert by_name.split() == ["configmap/cm-x"]
    failed = ok(kubectl("get", "pods", "-n", namespace, "--field-selector", "status.phase=Failed", "-o", "name"))
    assert [n.split("/")[1].rsplit("-", 1)[0] for n in failed.split()] == ["bad"]
    bad = kubectl("get", "pods", "-n", namespace, "--field-selector", "spec.bogus=1")
    assert bad.returncode == 1
    assert 'field label not supported: spec.bogus' in bad.stderr


def test_all_namespaces_lists_every_namespace_with_a_namespace_column(
        kubectl: Kubectl, namespace: str, other_namespace: str) -> None:
    marker = f"m{uuid.uuid4().hex[:6]}"
    for ns in (namespace, other_namespace):
        ok(kubectl("apply", "-n", ns, "-f", "-", input=manifest(configmap("shared", {}, labels={"m": marker}))))
    out = table(ok(kubectl("get", "cm", "-A", "-l", f"m={marker}")))
    assert out[0] == ["NAMESPACE", "NAME", "DATA", "AGE"]
    assert sorted((r[0], r[1]) for r in out[1:]) == sorted([(namespace, "shared"), (other_namespace, "shared")])


def test_get_of_a_missing_object_exits_1_with_not_found(kubectl: Kubectl, namespace: str) -> None:
    result = kubectl("get", "configmap", "nope", "-n", namespace)
    assert result.returncode == 1
    assert result.stderr.strip() == 'Error from server (NotFound): configmaps "nope" not found'
    ignored = kubectl("get", "configmap", "nope", "-n", namespace, "--ignore-not-found")
    assert ignored.returncode == 0 and ignored.stdout == ""


def test_get_of_an_unknown_resource_type_fails_from_discovery(kubectl: Kubectl, namespace: str) -> None:
    result = kubectl("get", "frobnicators", "-n", namespace)
    assert result.returncode == 1
    assert 'the server doesn\'t have a resource type "frobnicators"' in result.stderr


@pytest.mark.parametrize("validate", ["--validate=strict", "--validate=false"])
def test_apply_of_an_unknown_kind_says_no_matches_for_kind(kubectl: Kubectl, namespace: str, validate: str) -> None:
    # With validation on, kubectl first reads the Swagger 2.0 document (protobuf only) for a kind the OpenAPI v3
    # documents do not describe; the answer must let it go on to discovery's verdict, as a real API server does.
    doc = {"apiVersion": "example.com/v1", "kind": "Frobnicator", "metadata": {"name": "f"}, "spec": {}}
    result = kubectl("apply", validate, "-n", namespace, "-f", "-", input=manifest(doc))
    assert result.returncode == 1
    assert 'no matches for kind "Frobnicator" in version "example.com/v1"' in result.stderr, result.stderr
    assert "openapi" not in result.stderr and "content type" not in result.stderr


# --------------------------------------------------------------------------------------------------
# describe
# --------------------------------------------------------------------------------------------------


def test_describe_pod_shows_containers_state_and_events(kubectl: Kubectl, namespace: str,
                                                        kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(job("desc", "echo described"))))
    wait_for(job_done(kube, namespace, "desc"), what="job desc to finish")
    pod = pods_of(kube, namespace, "desc")[0]["metadata"]["name"]
    out = ok(kubectl("describe", "pod", pod, "-n", namespace))
    assert f"Name:             {pod}" in out
    assert f"Namespace:        {namespace}" in out
    assert "Status:           Succeeded" in out
    assert "Controlled By:  Job/desc" in out
    assert f"Image:         {BUSYBOX}" in out
    assert "echo described" in out
    assert "Reason:       Completed" in out and "Exit Code:    0" in out
    events = out.split("Events:", 1)[1]
    assert "Scheduled" in events and "default-scheduler" in events
    assert f"Successfully assigned {namespace}/{pod} to localkube" in events
    assert "Started" in events and "kubelet" in events


def test_describe_job_shows_pod_statuses_and_events(kubectl: Kubectl, namespace: str,
                                                    kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(job("dj", "true"))))
    wait_for(job_done(kube, namespace, "dj"), what="job dj to finish")
    out = ok(kubectl("describe", "job", "dj", "-n", namespace))
    assert "Name:             dj" in out
    assert "Completions:      1" in out
    assert "Backoff Limit:    0" in out
    assert "Pods Statuses:    0 Active (0 Ready) / 1 Succeeded / 0 Failed" in out
    assert "Completed At:" in out
    events = out.split("Events:", 1)[1]
    assert "SuccessfulCreate" in events and "job-controller" in events and "Created pod: dj-" in events


# --------------------------------------------------------------------------------------------------
# apply, create
# --------------------------------------------------------------------------------------------------


def test_apply_creates_then_configures_then_leaves_unchanged(kubectl: Kubectl, namespace: str,
                                                             kube: client.ApiClient) -> None:
    first = kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("app", {"k": "v1"})))
    assert ok(first).strip() == "configmap/app created"
    changed = kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("app", {"k": "v2"})))
    assert ok(changed).strip() == "configmap/app configured"
    assert changed.stderr == "", "kubectl must compute the patch from the server's OpenAPI without warnings"
    same = kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("app", {"k": "v2"})))
    assert ok(same).strip() == "configmap/app unchanged"
    cm = read(kube, "configmap", namespace, "app")
    assert cm["data"] == {"k": "v2"}
    last = json.loads(cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["data"] == {"k": "v2"}


def test_apply_removes_what_the_manifest_no_longer_has_and_keeps_what_others_added(
        kubectl: Kubectl, namespace: str, kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("app", {"keep": "1", "drop": "2"}))))
    client.CoreV1Api(kube).patch_namespaced_config_map("app", namespace, {"data": {"theirs": "3"}})
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("app", {"keep": "1"}))))
    assert read(kube, "configmap", namespace, "app")["data"] == {"keep": "1", "theirs": "3"}


def test_reapplying_a_job_with_a_new_label_leaves_its_immutable_template_alone(kubectl: Kubectl, namespace: str,
                                                                kube: client.ApiClient) -> None:
    spec = job("labelled", "true")
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(spec)))
    spec["metadata"]["labels"]["extra"] = "yes"
    changed = kubectl("apply", "-n", namespace, "-f", "-", input=manifest(spec))
    assert ok(changed).strip() == "job.batch/labelled configured"
    assert changed.stderr == ""
    got = read(kube, "job", namespace, "labelled")
    assert got["metadata"]["labels"] == {"app": "labelled", "extra": "yes"}
    assert got["spec"]["template"]["spec"]["containers"][0]["command"] == ["sh", "-c", "true"]


def test_create_f_creates_and_refuses_an_existing_name(kubectl: Kubectl, namespace: str,
                                                       kube: client.ApiClient) -> None:
    body = manifest(configmap("made", {"a": "b"}))
    assert ok(kubectl("create", "-n", namespace, "-f", "-", input=body)).strip() == "configmap/made created"
    assert read(kube, "configmap", namespace, "made")["data"] == {"a": "b"}
    again = kubectl("create", "-n", namespace, "-f", "-", input=body)
    assert again.returncode == 1
    assert 'Error from server (AlreadyExists): error when creating "STDIN": configmaps "made" already exists' \
        in again.stderr


IMPERATIVE = [
    ["configmap", "gen-cm", "--from-literal=a=b", "--from-literal=c=d"],
    ["secret", "generic", "gen-secret", "--from-literal=user=admin", "--type=example.com/basic"],
    ["serviceaccount", "gen-sa"],
    ["role", "gen-role", "--verb=get,list", "--resource=pods,jobs.batch", "--resource-name=one"],
    ["rolebinding", "gen-rb", "--role=gen-role", "--user=bob", "--group=devs", "--serviceaccount=ns:robot"],
    ["job", "gen-job", f"--image={BUSYBOX}", "--", "sh", "-c", "true"],
]


@pytest.mark.parametrize("args", IMPERATIVE, ids=lambda a: a[0])
def test_imperative_create_commands_store_what_kubectl_generated(kubectl: Kubectl, namespace: str,
                                                                 args: list[str]) -> None:
    """These commands send protobuf; the stored object must hold every field kubectl generated."""
    split = args.index("--") if "--" in args else len(args)
    flags, command = args[:split], args[split:]
    generated = json.loads(ok(kubectl("create", *flags, "-n", namespace, "--dry-run=client", "-o", "json",
                                      *command)))
    created = kubectl("create", *flags, "-n", namespace, *command)
    assert ok(created).strip().endswith(" created")
    kind = generated["kind"].lower() + (".batch" if generated["kind"] == "Job" else "")
    stored = json.loads(ok(kubectl("get", kind, generated["metadata"]["name"], "-n", namespace, "-o", "json")))

    def contained(want: Any, have: Any, path: str = "") -> None:
        if isinstance(want, dict):
            for k, v in want.items():
                if v in (None, {}, []):
                    continue
                assert isinstance(have, dict) and k in have, f"{path}.{k} missing from {have}"
                contained(v, have[k], f"{path}.{k}")
        elif isinstance(want, list):
            assert isinstance(have, list) and len(want) == len(have), f"{path}: {want} != {have}"
            for i, (w, h) in enumerate(zip(want, have, strict=True)):
                contained(w, h, f"{path}[{i}]")
        else:
            assert want == have, f"{path}: {want!r} != {have!r}"

    contained(generated, stored)


def test_imperative_create_of_cluster_scoped_objects(kubectl: Kubectl, kube: client.ApiClient) -> None:
    suffix = uuid.uuid4().hex[:8]
    ns, role, binding = f"gen-ns-{suffix}", f"gen-cr-{suffix}", f"gen-crb-{suffix}"
    try:
        assert ok(kubectl("create", "namespace", ns)).strip() == f"namespace/{ns} created"
        ok(kubectl("create", "clusterrole", role, "--verb=get", "--non-resource-url=/healthz"))
        ok(kubectl("create", "clusterrolebinding", binding, f"--clusterrole={role}", "--user=alice"))
        assert ok(kubectl("get", "namespace", ns, "-o", "jsonpath={.status.phase}")) == "Active"
        rules = json.loads(ok(kubectl("get", "clusterrole", role, "-o", "jsonpath={.rules}")))
        assert rules == [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]
        subjects = json.loads(ok(kubectl("get", "clusterrolebinding", binding, "-o", "jsonpath={.subjects}")))
        assert subjects == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]
        alice = kubectl("auth", "can-i", "get", "/healthz", "--as=alice")
        assert (alice.returncode, alice.stdout.strip()) == (0, "yes")
    finally:
        kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found")
        kubectl("delete", "clusterrole", role, "--ignore-not-found")
        kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false")


# --------------------------------------------------------------------------------------------------
# patch, annotate, label
# --------------------------------------------------------------------------------------------------


def test_strategic_merge_patch_merges_containers_by_name(kubectl: Kubectl, namespace: str,
                                                         kube: client.ApiClient) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"restartPolicy": "Never", "containers": [
               {"name": "main", "image": BUSYBOX, "command": ["sh", "-c", "sleep 30"]}]}}
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(pod)))
    out = kubectl("patch", "pod", "p", "-n", namespace, "--type=strategic",
                  "-p", '{"spec":{"containers":[{"name":"main","image":"busybox:1.37"}]}}')
    assert ok(out).strip() == "pod/p patched"
    got = read(kube, "pod", namespace, "p")["spec"]["containers"]
    assert [(c["name"], c["image"], c["command"]) for c in got] == [("main", "busybox:1.37", ["sh", "-c", "sleep 30"])]
    # The same body as a merge patch replaces the whole list, which a pod's spec may not do.
    replaced = kubectl("patch", "pod", "p", "-n", namespace, "--type=merge",
                       "-p", '{"spec":{"containers":[{"name":"main","image":"busybox:1.38"}]}}')
    assert replaced.returncode == 1
    assert 'The Pod "p" is invalid: spec: Forbidden: pod updates may not change fields' in replaced.stderr


def test_merge_patch_sets_fields_and_null_removes_them(kubectl: Kubectl, namespace: str,
                                                       kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("m", {"a": "1", "b": "2"}))))
    out = kubectl("patch", "cm", "m", "-n", namespace, "--type=merge", "-p", '{"data":{"a":null,"c":"3"}}')
    assert ok(out).strip() == "configmap/m patched"
    assert read(kube, "configmap", namespace, "m")["data"] == {"b": "2", "c": "3"}
    again = kubectl("patch", "cm", "m", "-n", namespace, "--type=merge", "-p", '{"data":{"c":"3"}}')
    assert ok(again).strip() == "configmap/m patched (no change)"


def test_json_patch_applies_operations_and_fails_as_a_whole(kubectl: Kubectl, namespace: str,
                                                            kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("j", {"a": "1"}))))
    ops = [{"op": "add", "path": "/data/b", "value": "2"}, {"op": "replace", "path": "/data/a", "value": "one"}]
    assert ok(kubectl("patch", "cm", "j", "-n", namespace, "--type=json", "-p", json.dumps(ops))).strip() \
        == "configmap/j patched"
    assert read(kube, "configmap", namespace, "j")["data"] == {"a": "one", "b": "2"}
    failing = [{"op": "add", "path": "/data/c", "value": "3"}, {"op": "test", "path": "/data/a", "value": "1"}]
    bad = kubectl("patch", "cm", "j", "-n", namespace, "--type=json", "-p", json.dumps(failing))
    assert bad.returncode == 1
    assert read(kube, "configmap", namespace, "j")["data"] == {"a": "one", "b": "2"}


def test_annotate_adds_and_only_overwrites_when_asked(kubectl: Kubectl, namespace: str,
                                                      kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("n", {}))))
    assert ok(kubectl("annotate", "cm", "n", "-n", namespace, "note=first")).strip() == "configmap/n annotated"
    refused = kubectl("annotate", "cm", "n", "-n", namespace, "note=second")
    assert refused.returncode == 1
    assert "--overwrite is false but found the following declared annotation(s): 'note' already has a value " \
           "(first)" in refused.stderr
    ok(kubectl("annotate", "cm", "n", "-n", namespace, "note=second", "--overwrite"))
    assert read(kube, "configmap", namespace, "n")["metadata"]["annotations"]["note"] == "second"
    ok(kubectl("annotate", "cm", "n", "-n", namespace, "note-"))
    assert "note" not in (read(kube, "configmap", namespace, "n")["metadata"].get("annotations") or {})


def test_label_overwrite_and_removal(kubectl: Kubectl, namespace: str, kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("l", {}, labels={"tier": "a"}))))
    refused = kubectl("label", "cm", "l", "-n", namespace, "tier=b")
    assert refused.returncode == 1
    assert "'tier' already has a value (a), and --overwrite is false" in refused.stderr
    assert ok(kubectl("label", "cm", "l", "-n", namespace, "tier=b", "--overwrite")).strip() == "configmap/l labeled"
    ok(kubectl("label", "cm", "l", "-n", namespace, "extra=1"))
    assert read(kube, "configmap", namespace, "l")["metadata"]["labels"] == {"tier": "b", "extra": "1"}
    assert ok(kubectl("label", "cm", "l", "-n", namespace, "tier-")).strip() == "configmap/l unlabeled"
    assert read(kube, "configmap", namespace, "l")["metadata"]["labels"] == {"extra": "1"}
    assert ok(kubectl("get", "cm", "-n", namespace, "-l", "tier", "-o", "name")) == ""


def test_removing_the_last_label_leaves_no_labels_field(kubectl: Kubectl, namespace: str) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("l", {}, labels={"tier": "a"}))))
    ok(kubectl("label", "cm", "l", "-n", namespace, "tier-"))
    assert "labels" not in json.loads(ok(kubectl("get", "cm", "l", "-n", namespace, "-o", "json")))["metadata"]


# --------------------------------------------------------------------------------------------------
# delete
# --------------------------------------------------------------------------------------------------


def test_delete_by_label_deletes_only_the_matching_objects(kubectl: Kubectl, namespace: str,
                                                           kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(
        configmap("gone-1", {}, labels={"batch": "x"}), configmap("gone-2", {}, labels={"batch": "x"}),
        configmap("kept", {}, labels={"batch": "y"}))))
    out = ok(kubectl("delete", "cm", "-n", namespace, "-l", "batch=x"))
    assert sorted(out.strip().splitlines()) == [f'configmap "gone-1" deleted from {namespace} namespace',
                                                f'configmap "gone-2" deleted from {namespace} namespace']
    left = {c["metadata"]["name"] for c in plain(kube, client.CoreV1Api(kube).list_namespaced_config_map(namespace))["items"]}
    assert "kept" in left and not left & {"gone-1", "gone-2"}


def test_delete_waits_until_the_object_and_its_foreground_dependents_are_gone(
        kubectl: Kubectl, namespace: str, kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(job("doomed", "sleep 30"))))
    wait_for(lambda: pods_of(kube, namespace, "doomed"), what="the job's pod")
    out = kubectl("delete", "job", "doomed", "-n", namespace, "--cascade=foreground", "--wait=true", timeout=60)
    assert ok(out).strip() == f'job.batch "doomed" deleted from {namespace} namespace'
    with pytest.raises(ApiException) as e:
        client.BatchV1Api(kube).read_namespaced_job("doomed", namespace)
    assert e.value.status == 404
    assert pods_of(kube, namespace, "doomed") == []


def test_delete_of_a_missing_object_fails_unless_ignored(kubectl: Kubectl, namespace: str) -> None:
    missing = kubectl("delete", "cm", "nope", "-n", namespace)
    assert missing.returncode == 1
    assert 'Error from server (NotFound): configmaps "nope" not found' in missing.stderr
    assert kubectl("delete", "cm", "nope", "-n", namespace, "--ignore-not-found").returncode == 0


# --------------------------------------------------------------------------------------------------
# logs, wait
# --------------------------------------------------------------------------------------------------


def test_logs_prints_what_the_container_wrote(kubectl: Kubectl, namespace: str, kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(job("talker", "echo one; echo two >&2; echo 3"))))
    wait_for(job_done(kube, namespace, "talker"), what="job talker to finish")
    assert ok(kubectl("logs", "job/talker", "-n", namespace)) == "one\ntwo\n3\n"
    assert ok(kubectl("logs", "job/talker", "-n", namespace, "--tail=1")) == "3\n"


def test_logs_follow_streams_until_the_container_exits(kubectl: Kubectl, kubectl_env: dict[str, str],
                                                       namespace: str, kube: client.ApiClient,
                                                       tmp_path: Path) -> None:
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    spec = gated_job("follower", ctl, "echo first", "echo second; sleep 0.2; echo last")
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(spec)))
    pod = wait_for(lambda: next(iter(pods_of(kube, namespace, "follower")), None), what="the job's pod")
    name = pod["metadata"]["name"]
    core = client.CoreV1Api(kube)

    def logged_first() -> bool:
        try:
            return "first" in core.read_namespaced_pod_log(name, namespace)
        except ApiException as e:  # 400 while the container is still waiting to start
            if e.status != 400:
                raise
            return False

    wait_for(logged_first, what="the first line in the log")
    with streaming(["logs", "-f", f"pod/{name}", "-n", namespace], kubectl_env) as logs:
        logs.wait_line(lambda ln: ln == "first", "the line written before following began")
        assert logs.proc.poll() is None, "logs -f keeps following a running container"
        (ctl / "go").touch()
        assert logs.proc.wait(timeout=20) == 0, "logs -f ends when the container exits"
    assert logs.lines == ["first", "second", "last"]


def test_wait_for_condition_complete_returns_when_the_job_succeeds(kubectl: Kubectl, namespace: str,
                                                                   kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(job("waited", "sleep 0.5"))))
    out = kubectl("wait", "--for=condition=complete", "job/waited", "-n", namespace, "--timeout=30s")
    assert ok(out).strip() == "job.batch/waited condition met"
    assert read(kube, "job", namespace, "waited")["status"]["succeeded"] == 1


def test_wait_for_a_condition_that_never_comes_times_out(kubectl: Kubectl, namespace: str,
                                                         kube: client.ApiClient) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(job("broken", "exit 1"))))
    assert ok(kubectl("wait", "--for=condition=failed", "job/broken", "-n", namespace, "--timeout=30s")).strip() \
        == "job.batch/broken condition met"
    never = kubectl("wait", "--for=condition=complete", "job/broken", "-n", namespace, "--timeout=1s")
    assert never.returncode == 1
    assert "timed out waiting for the condition on jobs/broken" in never.stderr


# --------------------------------------------------------------------------------------------------
# get -w
# --------------------------------------------------------------------------------------------------


def test_get_watch_streams_added_modified_and_deleted_rows(kubectl: Kubectl, kubectl_env: dict[str, str],
                                                           namespace: str, kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    with streaming(["get", "configmaps", "-n", namespace, "-w", "--output-watch-events"], kubectl_env) as w:
        w.wait_line(lambda ln: ln.split()[:2] == ["EVENT", "NAME"], "the table header")
        core.create_namespaced_config_map(namespace, configmap("watched", {"a": "1"}))  # type: ignore[arg-type]
        w.wait_line(lambda ln: ln.split()[:3] == ["ADDED", "watched", "1"], "ADDED row")
        core.patch_namespaced_config_map("watched", namespace, {"data": {"a": "1", "b": "2"}})
        w.wait_line(lambda ln: ln.split()[:3] == ["MODIFIED", "watched", "2"], "MODIFIED row")
        core.delete_namespaced_config_map("watched", namespace)
        w.wait_line(lambda ln: ln.split()[:2] == ["DELETED", "watched"], "DELETED row")
        assert w.proc.poll() is None, "a watch keeps running until stopped"
        rows = [ln.split()[0] for ln in list(w.lines) if ln.split()[1:2] == ["watched"]]
    assert rows == ["ADDED", "MODIFIED", "DELETED"]


def test_get_watch_shows_a_job_pod_running_to_completion(kubectl: Kubectl, kubectl_env: dict[str, str],
                                                         namespace: str, tmp_path: Path) -> None:
    with streaming(["get", "pods", "-n", namespace, "-l", "app=watched-job", "-w"], kubectl_env) as w:
        ok(kubectl("apply", "-n", namespace, "-f", "-",
                   input=manifest(gated_job("watched-job", tmp_path, "true", "true"))))
        w.wait_line(lambda ln: ln.split()[1:3] == ["1/1", "Running"], "the pod's Running row")
        (tmp_path / "go").touch()
        w.wait_line(lambda ln: ln.split()[1:3] == ["0/1", "Completed"], "the pod's Completed row")
        # Read while kubectl still runs: a line cut short by terminating it is not a row.
        rows = [ln.split() for ln in list(w.lines)]
    assert rows[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert all(r[0].startswith("watched-job-") for r in rows[1:])
    statuses = [r[2] for r in rows[1:]]
    assert statuses.index("Running") < statuses.index("Completed")


# --------------------------------------------------------------------------------------------------
# auth, discovery, version
# --------------------------------------------------------------------------------------------------


def test_auth_can_i_answers_for_the_admin(kubectl: Kubectl, namespace: str) -> None:
    yes = kubectl("auth", "can-i", "create", "pods", "-n", namespace)
    assert (yes.returncode, yes.stdout.strip()) == (0, "yes")
    assert ok(kubectl("auth", "can-i", "*", "*")).strip() == "yes"
    assert ok(kubectl("auth", "can-i", "get", "/healthz")).strip() == "yes"


def test_auth_can_i_as_a_service_account_follows_its_rbac(kubectl: Kubectl, namespace: str,
                                                          other_namespace: str) -> None:
    ok(kubectl("create", "serviceaccount", "robot", "-n", namespace))
    ok(kubectl("create", "role", "reader", "-n", namespace, "--verb=get,list", "--resource=pods"))
    ok(kubectl("create", "rolebinding", "robot-reads", "-n", namespace, "--role=reader",
               f"--serviceaccount={namespace}:robot"))
    robot = f"--as=system:serviceaccount:{namespace}:robot"
    allowed = kubectl("auth", "can-i", "list", "pods", "-n", namespace, robot)
    assert (allowed.returncode, allowed.stdout.strip()) == (0, "yes")
    denied = kubectl("auth", "can-i", "delete", "pods", "-n", namespace, robot)
    assert (denied.returncode, denied.stdout.strip()) == (1, "no")
    elsewhere = kubectl("auth", "can-i", "list", "pods", "-n", other_namespace, robot)
    assert (elsewhere.returncode, elsewhere.stdout.strip()) == (1, "no")
    forbidden = kubectl("get", "jobs", "-n", namespace, robot)
    assert forbidden.returncode == 1
    assert (f'Error from server (Forbidden): jobs.batch is forbidden: User "system:serviceaccount:{namespace}:robot" '
            f'cannot list resource "jobs" in API group "batch" in the namespace "{namespace}"') in forbidden.stderr


def test_api_resources_lists_the_served_kinds(kubectl: Kubectl) -> None:
    rows = {r[0]: r for r in table(ok(kubectl("api-resources")))[1:]}
    assert rows["pods"] == ["pods", "po", "v1", "true", "Pod"]
    assert rows["jobs"] == ["jobs", "batch/v1", "true", "Job"]
    assert rows["customresourcedefinitions"] == ["customresourcedefinitions", "crd,crds", "apiextensions.k8s.io/v1",
                                                 "false", "CustomResourceDefinition"]
    cluster_scoped = ok(kubectl("api-resources", "--namespaced=false", "-o", "name")).split()
    assert {"namespaces", "nodes", "clusterroles.rbac.authorization.k8s.io"} <= set(cluster_scoped)
    assert "pods" not in cluster_scoped
    batch = table(ok(kubectl("api-resources", "--api-group=batch", "-o", "wide")))
    assert batch[1][-2:] == ["create,delete,deletecollection,get,list,patch,update,watch", "all"]


def test_explain_describes_builtin_and_custom_fields_from_the_servers_openapi(
        kubectl: Kubectl, widget_group: str) -> None:
    containers = ok(kubectl("explain", "pods.spec.containers"))
    assert "FIELD: containers <[]Container>" in containers
    assert "image\t<string>" in containers and "name\t<string> -required-" in containers
    assert "FIELD: template <PodTemplateSpec>" in ok(kubectl("explain", "jobs.spec.template"))
    ok(kubectl("apply", "-f", "-", input=manifest(crd(widget_group))))
    ok(kubectl("wait", "--for=condition=established", f"crd/widgets.{widget_group}", "--timeout=30s"))
    spec = ok(kubectl("explain", f"widgets.{widget_group}.spec"))
    assert "size\t<integer> -required-" in spec and "color\t<string>" in spec


def test_version_reports_the_server_version(kubectl: Kubectl) -> None:
    out = json.loads(ok(kubectl("version", "-o", "json")))
    assert out["serverVersion"]["gitVersion"] == discovery.VERSION_INFO["gitVersion"]
    assert out["clientVersion"]["major"] == "1"


# --------------------------------------------------------------------------------------------------
# custom resources
# --------------------------------------------------------------------------------------------------


def test_applied_crd_serves_custom_resources_with_printer_columns(kubectl: Kubectl, namespace: str,
                                                                  widget_group: str, kube: client.ApiClient) -> None:
    assert ok(kubectl("apply", "-f", "-", input=manifest(crd(widget_group)))).strip() == \
        f"customresourcedefinition.apiextensions.k8s.io/widgets.{widget_group} created"
    ok(kubectl("wait", "--for=condition=established", f"crd/widgets.{widget_group}", "--timeout=30s"))
    widget: Obj = {"apiVersion": f"{widget_group}/v1", "kind": "Widget", "metadata": {"name": "w1"},
              "spec": {"size": 3, "color": "blue"}}
    assert ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(widget))).strip() == \
        f"widget.{widget_group}/w1 created"
    # A version that declares columns gets exactly those (no implicit AGE); priority 1 only with -o wide.
    got = table(ok(kubectl("get", f"widgets.{widget_group}", "-n", namespace)))
    assert got == [["NAME", "SIZE", "COLOR"], ["w1", "3", "blue"]]
    wide = table(ok(kubectl("get", f"widgets.{widget_group}", "-n", namespace, "-o", "wide")))
    assert wide[0] == ["NAME", "SIZE", "COLOR", "PHASE"]
    widget["spec"]["size"] = 4
    assert ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(widget))).strip() == \
        f"widget.{widget_group}/w1 configured"
    stored: Any = client.CustomObjectsApi(kube).get_namespaced_custom_object(widget_group, "v1", namespace, "widgets",
                                                                             "w1")
    assert stored["spec"] == {"size": 4, "color": "blue"}
    assert ok(kubectl("get", "wdg", "w1", "-n", namespace, "-o", "jsonpath={.spec.size}")) == "4"
    assert f"widgets.{widget_group}" in ok(kubectl("api-resources", f"--api-group={widget_group}", "-o", "name"))


def test_a_crd_without_printer_columns_shows_name_and_age(kubectl: Kubectl, namespace: str,
                                                          widget_group: str) -> None:
    ok(kubectl("apply", "-f", "-", input=manifest(crd(widget_group, columns=False))))
    ok(kubectl("wait", "--for=condition=established", f"crd/widgets.{widget_group}", "--timeout=30s"))
    widget = {"apiVersion": f"{widget_group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(widget)))
    got = table(ok(kubectl("get", f"widgets.{widget_group}", "-n", namespace)))
    assert got[0] == ["NAME", "AGE"] and got[1][0] == "w"
    crds = table(ok(kubectl("get", "crd", f"widgets.{widget_group}")))
    assert crds[0] == ["NAME", "CREATED AT"]


def test_invalid_custom_resource_is_rejected_with_the_schema_message(kubectl: Kubectl, namespace: str,
                                                                    widget_group: str) -> None:
    ok(kubectl("apply", "-f", "-", input=manifest(crd(widget_group))))
    ok(kubectl("wait", "--for=condition=established", f"crd/widgets.{widget_group}", "--timeout=30s"))
    bad = {"apiVersion": f"{widget_group}/v1", "kind": "Widget", "metadata": {"name": "tiny"}, "spec": {"size": 0}}
    result = kubectl("apply", "-n", namespace, "-f", "-", input=manifest(bad))
    assert result.returncode == 1
    assert ('The Widget "tiny" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than '
            'or equal to 1') in result.stderr
    strategic = kubectl("patch", f"widgets.{widget_group}", "tiny", "-n", namespace, "-p", "{}")
    assert strategic.returncode == 1


# --------------------------------------------------------------------------------------------------
# server-side dry run and errors
# --------------------------------------------------------------------------------------------------


def test_server_dry_run_validates_and_defaults_but_persists_nothing(kubectl: Kubectl, namespace: str,
                                                                    kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    out = kubectl("apply", "-n", namespace, "--dry-run=server", "-f", "-", input=manifest(configmap("dry", {})))
    assert ok(out).strip() == "configmap/dry created (server dry run)"
    with pytest.raises(ApiException) as e:
        core.read_namespaced_config_map("dry", namespace)
    assert e.value.status == 404
    made = json.loads(ok(kubectl("create", "-n", namespace, "--dry-run=server", "-o", "json", "-f", "-",
                                 input=manifest(job("dry-job", "true")))))
    assert made["metadata"]["uid"] and made["metadata"]["creationTimestamp"]
    assert made["spec"]["backoffLimit"] == 0 and made["spec"]["completions"] == 1
    assert made["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"] == made["metadata"]["uid"]
    assert client.BatchV1Api(kube).list_namespaced_job(namespace).items == []
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(configmap("real", {"k": "v1"}))))
    changed = kubectl("apply", "-n", namespace, "--dry-run=server", "-f", "-", input=manifest(configmap("real", {"k": "v2"})))
    assert ok(changed).strip() == "configmap/real configured (server dry run)"
    assert core.read_namespaced_config_map("real", namespace).data == {"k": "v1"}
    invalid = kubectl("apply", "-n", namespace, "--dry-run=server", "-f", "-", input=manifest(configmap("Bad", {})))
    assert invalid.returncode == 1 and 'The ConfigMap "Bad" is invalid' in invalid.stderr


def test_apply_of_an_invalid_object_prints_the_servers_is_invalid_message(kubectl: Kubectl,
                                                                          namespace: str) -> None:
    bad = job("bad-policy", "true")
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    result = kubectl("apply", "-n", namespace, "-f", "-", input=manifest(bad))
    assert result.returncode == 1
    assert ('The Job "bad-policy" is invalid: spec.template.spec.restartPolicy: Unsupported value: "Always": '
            'supported values: "OnFailure", "Never"') in result.stderr


@pytest.mark.xfail(strict=True, reason="apiserver applies fieldValidation only to custom resources; built-in "
                                       "kinds keep unknown fields instead of rejecting them (Strict)")
def test_apply_refuses_unknown_fields_of_a_builtin_kind(kubectl: Kubectl, namespace: str) -> None:
    body = {**configmap("strict", {"a": "b"}), "bogus": 1}
    result = kubectl("apply", "-n", namespace, "-f", "-", input=manifest(body))
    assert result.returncode == 1
    assert 'strict decoding error: unknown field "bogus"' in result.stderr


def test_job_pod_template_containers_are_defaulted(kubectl: Kubectl, namespace: str) -> None:
    ok(kubectl("apply", "-n", namespace, "-f", "-", input=manifest(job("defaults", "true"))))
    container = json.loads(ok(kubectl("get", "job", "defaults", "-n", namespace, "-o",
                                      "jsonpath={.spec.template.spec.containers[0]}")))
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
