"""The agent pod's part of a run's SkillPacks: /skills, SYMPOZIUM_SKILL_TARGETS, and each pack's sidecar with its
own identity.

Kubernetes gives every container of a pod the pod's one ServiceAccount token, so a sidecar cannot hold rights the
agent container beside it lacks through the pod's ServiceAccount. The agent pod therefore keeps the permission-less
`sympozium-agent` account with no token mounted, and each sidecar gets a token of its own per-run ServiceAccount:
the worker asks for it with a TokenRequest (expiring with the attempt, plus slack) and creates a per-run Secret
holding it, which only the sidecar's container mounts (at the standard ServiceAccount path, so in-cluster clients
find it). The agent container has no such mount, so it cannot read the token. At cleanup the Secret, RoleBinding,
Role and account are deleted; a token of a deleted account is refused at once. The worker never reads or patches a
Secret (it creates the Secret with the token in it, and replaces one that is there), so it holds no `get` on them.

Sidecars are native sidecars (init containers with `restartPolicy: Always`): the Job completes when the agent
does, and the kubelet stops them, so a `sleep infinity` sidecar never holds a run open. Each one's command runs
under the executor (activities/exec_manifests.py), so `execute_command{target: <pack>}` and the pack's declared tools
run in it, with its token.

A pack's `clusterRBAC` becomes a ClusterRole and ClusterRoleBinding per run, bound to the sidecar's account alone.
Cluster-scoped objects cannot be owned by a namespaced run (the garbage collector would not honour it), so they are
labelled with the run (name, uid and namespace) and removed by the run's cleanup step; what a cleanup could not
remove (its run deleted without it) is found by those labels and removed by the pruning pass
(activities/prune.py). The worker can only grant what it holds (Kubernetes' escalation rule): the chart's
`worker.grantableClusterRules`.
"""

from __future__ import annotations

import json
from typing import Any

from models.names import (
    LABEL_COMPONENT,
    LABEL_MANAGED,
    LABEL_RUN,
    LABEL_RUN_NAMESPACE,
    LABEL_RUN_UID,
    MANAGED_BY,
)
from models.resolve import ResolvedRun
from models.skills import (
    ResolvedSkillPack,
    sidecar_account,
    sidecar_cluster_role,
    sidecar_container,
    tools_manifest,
)

from . import exec_manifests as xm

Manifest = dict[str, Any]

SKILLS_VOLUME = "skills"
SKILL_LABEL = "sympozium.ai/skill"  # the pack a run's sidecar RBAC object is for (Sympozium's label)
SKILLS_PATH = "/skills"
SA_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"  # where in-cluster clients look for their token
TOKEN_KEY = "token"
RBAC_API = "rbac.authorization.k8s.io"
# A sidecar's token outlives the agent Job by this much (a TokenRequest asks for at least 10 minutes).
TOKEN_SLACK_SECONDS = 600


def skills_volumes(run: ResolvedRun) -> list[Manifest]:
    vols: list[Manifest] = []
    if run.skill_packs:
        # Optional, as Sympozium projects them: a pack whose ConfigMap is not generated yet mounts empty.
        vols.append({"name": SKILLS_VOLUME, "projected": {"sources": [
            {"configMap": {"name": p.config_map, "optional": True}} for p in run.skill_packs]}})
    for i, p in enumerate(run.sidecars):
        vols.append({"name": token_volume(i), "projected": {"sources": [
            {"secret": {"name": sidecar_account(run.ref.name, p.name),
                        "items": [{"key": TOKEN_KEY, "path": TOKEN_KEY}]}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]}})
    return vols


def token_volume(i: int) -> str:
    return f"skill-token-{i}"


def agent_skill_mounts(run: ResolvedRun) -> list[Manifest]:
    return [{"name": SKILLS_VOLUME, "mountPath": SKILLS_PATH, "readOnly": True}] if run.skill_packs else []


def agent_skill_env(run: ResolvedRun) -> list[Manifest]:
    """SYMPOZIUM_SKILL_TARGETS: the packs with a sidecar, comma-separated in spec order, as Sympozium sets it; their
    declared tools (AGENT_SIDECAR_TOOLS) and the skills' params (AGENT_SKILL_PARAMS, for the prompt)."""
    env: list[Manifest] = []
    names = [p.name for p in run.sidecars]
    if names:
        env.append({"name": "SYMPOZIUM_SKILL_TARGETS", "value": ",".join(names)})
    manifest = tools_manifest(run.skill_packs)
    if manifest:
        env.append({"name": "AGENT_SIDECAR_TOOLS", "value": manifest})
    params = {p.name: p.params for p in run.skill_packs if p.params}
    if params:
        env.append({"name": "AGENT_SKILL_PARAMS", "value": json.dumps(params, separators=(",", ":"),
                                                                       sort_keys=True)})
    return env


def _env(p: ResolvedSkillPack) -> list[Manifest]:
    """The sidecar's own env, its pack's name, then its skill's params (`SKILL_<KEY>`, Sympozium's)."""
    assert p.sidecar is not None
    return [*(e.manifest() for e in p.sidecar.env), {"name": "SKILL_PACK", "value": p.name},
            *(e.manifest() for e in p.param_env())]


def sidecar_containers(run: ResolvedRun, agent_mounts: list[Manifest]) -> list[Manifest]:
    """One native sidecar per pack with a sidecar: its image, command, env, resources (request = limit, as
    Sympozium sets them), the run's workspace and IPC unless `mountWorkspace: false`, and its own token."""
    out: list[Manifest] = []
    for i, p in enumerate(run.sidecars):
        sc = p.sidecar
        assert sc is not None
        # The run's workspace and IPC unless the pack says not to; a /tmp shared with the other containers that run
        # commands, never the agent's.
        mounts = [m for m in agent_mounts if m["name"] != SKILLS_VOLUME and m["mountPath"] != "/tmp" and (
            sc.mount_workspace or m["mountPath"] not in ("/workspace", "/ipc"))]
        mounts.append(xm.exec_tmp_mount())
        mounts.append({"name": token_volume(i), "mountPath": SA_PATH, "readOnly": True})
        mounts.append(xm.target_mount(p.name))
        quantity = {"cpu": sc.cpu, "memory": sc.memory}
        c: Manifest = {"name": sidecar_container(p.name), "image": sc.image, "restartPolicy": "Always",
                       "command": xm.wrapped(p.name, sc.command), "env": _env(p),
                       "volumeMounts": mounts,
                       "resources": {"requests": dict(quantity), "limits": dict(quantity)},
                       "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
        if sc.image_pull_policy:
            c["imagePullPolicy"] = sc.image_pull_policy
        out.append(c)
    return out


def sidecar_rbac(run: ResolvedRun, p: ResolvedSkillPack, meta: Manifest) -> list[Manifest]:
    """ServiceAccount, token Secret, Role with exactly the pack's rules, and RoleBinding, all per run. `meta` is the
    run objects' metadata (owner, labels) for this name."""
    assert p.sidecar is not None
    name = meta["name"]
    rules = [{"apiGroups": list(r.api_groups), "resources": list(r.resources), "verbs": list(r.verbs)}
             for r in p.sidecar.rules]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta, "automountServiceAccountToken": False},
        {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque"},
        {"apiVersion": f"{RBAC_API}/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {"apiVersion": f"{RBAC_API}/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": RBAC_API, "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": run.ref.namespace}]},
    ]


def cluster_labels(run: ResolvedRun, pack: str) -> dict[str, str]:
    """What finds a run's cluster-scoped RBAC again: its name, uid and namespace (no owner reference can)."""
    return {LABEL_RUN: run.ref.name, LABEL_RUN_UID: run.ref.uid, LABEL_RUN_NAMESPACE: run.ref.namespace,
            LABEL_COMPONENT: "skill", LABEL_MANAGED: MANAGED_BY, SKILL_LABEL: pack}


def sidecar_cluster_rbac(run: ResolvedRun, p: ResolvedSkillPack) -> list[Manifest]:
    """The pack's clusterRBAC for this run: a ClusterRole with exactly its rules and a ClusterRoleBinding to the
    sidecar's account ([] when the pack asks for none)."""
    assert p.sidecar is not None
    if not p.sidecar.cluster_rules:
        return []
    name = sidecar_cluster_role(run.ref.namespace, run.ref.name, run.ref.uid, p.name)
    meta = {"name": name, "labels": cluster_labels(run, p.name)}
    rules = [{"apiGroups": list(r.api_groups), "resources": list(r.resources), "verbs": list(r.verbs)}
             for r in p.sidecar.cluster_rules]
    return [
        {"apiVersion": f"{RBAC_API}/v1", "kind": "ClusterRole", "metadata": meta, "rules": rules},
        {"apiVersion": f"{RBAC_API}/v1", "kind": "ClusterRoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": RBAC_API, "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": sidecar_account(run.ref.name, p.name),
                       "namespace": run.ref.namespace}]},
    ]


def token_request(run: ResolvedRun) -> Manifest:
    """A token of the sidecar's account for this attempt (and some slack); it dies with the account at cleanup."""
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": run.timeout_seconds + TOKEN_SLACK_SECONDS}}
