"""SkillPacks end to end: the strict schema, the bridge's generated ConfigMap, the files at /skills in the agent
pod, and a sidecar that holds exactly its pack's RBAC through a per-run identity the agent container cannot use,
all gone after the run."""

from __future__ import annotations

import base64
import hashlib
import json
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes import client

from localkube.testing import Handle
from models.skillpack import SkillPackSpec, skill_files
from tests.conftest import Kubectl
from tests.e2e.conftest import Stack, agent, agent_run
from tests.waiting import wait_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sympozium" / "skillpack.yaml"
RULES = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]
# The sidecar asks the API server, with the token mounted at the standard path, what its own identity may do.
SIDECAR = """
import json, os, pathlib, ssl, time, urllib.error, urllib.request
d = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")
token, ns = (d / "token").read_text(), (d / "namespace").read_text()
ctx = ssl.create_default_context(cafile=str(d / "ca.crt"))
base = "https://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
def status(path):
    req = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token})
    try:
        return urllib.request.urlopen(req, context=ctx).status
    except urllib.error.HTTPError as e:
        return e.code
print(json.dumps({"configmaps": status("/api/v1/namespaces/%s/configmaps" % ns),
                  "secrets": status("/api/v1/namespaces/%s/secrets" % ns),
                  "pods": status("/api/v1/namespaces/%s/pods" % ns),
                  "pack": os.environ.get("SKILL_PACK")}), flush=True)
while True:
    time.sleep(3600)
"""


def _pack(stack: Stack, ns: str, name: str) -> dict[str, Any]:
    return cast(dict[str, Any], stack.custom.get_namespaced_custom_object("sympozium.ai", "v1alpha1", ns,
                                                                          "skillpacks", name))


def test_a_skill_pack_applies_strictly_whole_and_its_configmap_follows_its_edits(
        stack: Stack, namespace: str, kubectl: Kubectl) -> None:
    ns = namespace
    text = FIXTURE.read_text()
    doc = yaml.safe_load(text)
    out = kubectl("apply", "--validate=strict", "-n", ns, "-f", "-", input=text)
    assert out.returncode == 0, out.stderr
    pack = _pack(stack, ns, "ops-toolkit")
    assert pack["spec"] == doc["spec"]  # nothing pruned

    def generated() -> Any:
        try:
            cm = stack.core.read_namespaced_config_map("ops-toolkit", ns)
        except Exception:
            return None
        return cm if cm.data == skill_files(SkillPackSpec.model_validate(doc["spec"])) else None

    cm = wait_for(generated, what="the SkillPack's ConfigMap")
    assert [(o.kind, o.name, o.uid, o.controller) for o in cm.metadata.owner_references] == [
        ("SkillPack", "ops-toolkit", pack["metadata"]["uid"], True)]
    status = wait_for(lambda: (_pack(stack, ns, "ops-toolkit").get("status") or {}).get("skillCount") and
                      _pack(stack, ns, "ops-toolkit")["status"], what="the SkillPack's status")
    assert (status["phase"], status["configMapName"], status["skillCount"]) == ("Ready", "ops-toolkit", 2)
    ignored = next(c for c in status["conditions"] if c["type"] == "FieldsIgnored")
    # clusterRBAC acts (a per-run ClusterRole); hostAccess does not.
    assert "spec.sidecar.clusterRBAC" not in ignored["message"] and "spec.sidecar.hostAccess" in ignored["message"]
    assert ignored["reason"] == "NoEffectHere"  # as on runs and the other packs

    # An edit: one skill rewritten, one removed; the ConfigMap holds exactly the new files.
    patch = [{"op": "replace", "path": "/spec/skills", "value": [{"name": "triage", "content": "v2"}]}]
    out = kubectl("patch", "skillpack", "ops-toolkit", "-n", ns, "--type=json", "-p", json.dumps(patch))
    assert out.returncode == 0, out.stderr
    wait_for(lambda: stack.core.read_namespaced_config_map("ops-toolkit", ns).data == {"triage.md": "v2"},
             what="the ConfigMap to follow the edit")

    # A sidecar without a command runs the executor alone, not its image's entrypoint: the pack's status says so.
    out = kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump({
        "apiVersion": "sympozium.ai/v1alpha1", "kind": "SkillPack", "metadata": {"name": "bare"},
        "spec": {"skills": [{"name": "s", "content": "x"}], "sidecar": {"image": "registry.example/tools:1"}}}))
    assert out.returncode == 0, out.stderr
    note = wait_for(lambda: next((c for c in (_pack(stack, ns, "bare").get("status") or {}).get("conditions") or []
                                  if c["type"] == "EntrypointNotRun"), None), what="the bare pack's condition")
    assert (note["status"], note["reason"]) == ("True", "NoCommand") and "executor alone" in note["message"]


def _token_works(localkube: Handle, token: str, ns: str) -> int:
    cfg = yaml.safe_load(Path(localkube.kubeconfig).read_text())
    cluster = cfg["clusters"][0]["cluster"]
    ctx = ssl.create_default_context()
    ctx.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    req = urllib.request.Request(f"{cluster['server']}/api/v1/namespaces/{ns}/configmaps",
                                 headers={"Authorization": f"Bearer {token}"})
    try:
        return int(urllib.request.urlopen(req, context=ctx, timeout=10).status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_the_agent_reads_the_packs_files_and_its_sidecar_alone_holds_exactly_the_packs_rbac_until_the_run_ends(
        stack: Stack, namespace: str, localkube: Handle) -> None:
    ns, name = namespace, "skilled"
    account = f"sympozium-skill-probe-tools-{name}"
    stack.create(ns, "agents", agent())
    stack.create(ns, "skillpacks", {
        "apiVersion": "sympozium.ai/v1alpha1", "kind": "SkillPack", "metadata": {"name": "guides"},
        "spec": {"skills": [{"name": "deploy", "description": "How we deploy", "content": "Roll out slowly."}]}})
    stack.create(ns, "skillpacks", {
        "apiVersion": "sympozium.ai/v1alpha1", "kind": "SkillPack", "metadata": {"name": "probe-tools"},
        "spec": {"skills": [{"name": "probe", "content": "Ask the sidecar."}],
                 "sidecar": {"image": "python:3.12-slim", "command": [sys.executable, "-c", SIDECAR],
                             "rbac": RULES, "resources": {"cpu": "50m", "memory": "64Mi"}}}})
    wait_for(lambda: all(_has_configmap(stack, ns, n) for n in ("guides", "probe-tools")),
             what="both packs' ConfigMaps")
    # Skills as a plain name and as {skillPackRef} (Sympozium's two forms); the echo agent takes a few seconds, in
    # which the sidecar asks the API server what it may do.
    stack.create(ns, "agentruns", agent_run(name, task="sleep:5 hello", cleanup="keep",
                                            skills=["guides", {"skillPackRef": "probe-tools"}],
                                            env={"AGENT_LIST_SKILLS": "true"}))
    stack.wait_phase(ns, name, {"Running"})
    role = stack.rbac.read_namespaced_role(account, ns)
    assert stack.api.sanitize_for_serialization(role.rules) == RULES
    binding = stack.rbac.read_namespaced_role_binding(account, ns)
    assert [(s.kind, s.name) for s in binding.subjects] == [("ServiceAccount", account)]
    token = base64.b64decode(stack.core.read_namespaced_secret(account, ns).data["token"]).decode()
    assert _token_works(localkube, token, ns) == 200  # the sidecar's token, while the run lasts

    run = stack.wait_phase(ns, name)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    files = {"deploy.md": "# deploy\n\n> How we deploy\n\nRoll out slowly.", "probe.md": "Ask the sidecar."}
    assert run["status"]["result"].splitlines()[-3:] == ["skills seen under /skills:"] + [
        f"- {n} ({len(c.encode())} bytes, sha256 {hashlib.sha256(c.encode()).hexdigest()})"
        for n, c in sorted(files.items())]

    pod = stack.core.list_namespaced_pod(
        ns, label_selector=f"sympozium.ai/agent-run={name},sympozium.ai/component=agent-run").items[0]
    env = {e.name: e.value for e in pod.spec.containers[0].env}
    assert env["SYMPOZIUM_SKILL_TARGETS"] == "probe-tools"
    # The sidecar could read ConfigMaps (its rule) and nothing else.
    # (The sidecar's log also has its executor's line.)
    log = stack.core.read_namespaced_pod_log(pod.metadata.name, ns, container="skill-probe-tools")
    checked = json.loads(next(line for line in log.splitlines() if line.startswith("{")))
    assert checked == {"configmaps": 200, "secrets": 403, "pods": 403, "pack": "probe-tools"}
    # The agent container: the pod's account is the permission-less one with no token; only the sidecar mounts its
    # token; and that account may not do what the sidecar may.
    assert (pod.spec.service_account_name, pod.spec.automount_service_account_token) == ("sympozium-agent", False)
    agent_mounts = {m.mount_path for m in pod.spec.containers[0].volume_mounts}
    assert "/var/run/secrets/kubernetes.io/serviceaccount" not in agent_mounts and "/skills" in agent_mounts
    [sidecar] = [c for c in pod.spec.init_containers if c.name == "skill-probe-tools"]
    assert "/var/run/secrets/kubernetes.io/serviceaccount" in {m.mount_path for m in sidecar.volume_mounts}
    assert all("/var/run/secrets/kubernetes.io/serviceaccount" not in {m.mount_path for m in c.volume_mounts}
               for c in pod.spec.init_containers if c.name != "skill-probe-tools"), "nor the tools container"
    review: Any = client.AuthorizationV1Api(stack.api).create_subject_access_review({  # type: ignore[arg-type]
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": f"system:serviceaccount:{ns}:sympozium-agent",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}"],
            "resourceAttributes": {"namespace": ns, "verb": "list", "resource": "configmaps"}}})
    assert review.status.allowed is False

    # After the run: the sidecar's account, Secret, Role and RoleBinding are gone, and so is its token's validity.
    def gone() -> bool:
        return not any(account in [o.metadata.name for o in lst(ns).items] for lst in (
            stack.core.list_namespaced_service_account, stack.core.list_namespaced_secret,
            stack.rbac.list_namespaced_role, stack.rbac.list_namespaced_role_binding))
    wait_for(gone, what="the sidecar's per-run RBAC to be deleted")
    assert _token_works(localkube, token, ns) == 401


def _has_configmap(stack: Stack, ns: str, name: str) -> bool:
    return any(cm.metadata.name == name for cm in stack.core.list_namespaced_config_map(ns).items)
