"""A run's skills resolved against the SkillPacks they name: what its agent pod mounts and which sidecars run.

Resolved once, when the run starts (`evaluate_run`), like the rest of the spec: later edits of a SkillPack change
the files of runs that start later (through its ConfigMap) but never the sidecar or the RBAC of a run in flight.
A SkillPack that does not exist is skipped, as Sympozium does (its ConfigMap projection is optional and no sidecar
is added), so Sympozium's samples that name built-in packs (`k8s-ops`) still run here.

A sidecar's RBAC (`rbac`, a Role, and `clusterRBAC`, a ClusterRole, both minted per run) is checked against the
policy's `lifecyclePolicy.deniedResources` exactly like `lifecycle.rbac`, and its image against
`imagePolicy.allowedRegistries` like a hook's.

Each sidecar is a target of the agent's `execute_command` (its command wrapped by the executor,
agentrunner/executor.py): its declared `tools[]` become the manifest the agent offers them from
(`AGENT_SIDECAR_TOOLS`, the shape Sympozium's controller writes), and a skill's `params` reach its sidecar as
`SKILL_<KEY>` env (Sympozium's names) and the agent's prompt (`AGENT_SKILL_PARAMS`). A sidecar without a `command`
runs the executor alone: its image's own entrypoint cannot be wrapped without reading the image from its registry,
so it does not run (the admission webhook and the pack's status say so).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import Field

from .agentrun import EnvVar, RBACRule, SkillRef
from .base import FieldProblem, K8sModel, PolicyViolation, parse
from .policy import PolicyRules
from .skillpack import SkillPackSpec, SkillSidecar

SKILLPACKS = "skillpacks"
# Sympozium's AgentRun controller accepts the ConfigMap's name with this prefix for the SkillPack's.
CONFIGMAP_PREFIX = "skillpack-"
SIDECAR_CPU = "100m"  # Sympozium's defaults for a sidecar's request (= limit)
SIDECAR_MEMORY = "128Mi"
# A skill's params reach its sidecar as env `SKILL_<KEY>` (Sympozium's); a key must make an env name.
PARAM_ENV_PREFIX = "SKILL_"
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
# The sidecar tools' manifest travels in one env variable of the agent: well under the kernel's 128 KiB per string.
MAX_TOOLS_MANIFEST_BYTES = 64 * 1024
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


class ResolvedSidecar(K8sModel):
    image: str
    image_pull_policy: str | None = None
    # The sidecar's own command, run under the executor; empty: the executor alone (see the module's docstring).
    command: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    mount_workspace: bool = True
    cpu: str = SIDECAR_CPU
    memory: str = SIDECAR_MEMORY
    rules: list[RBACRule] = Field(default_factory=list)
    cluster_rules: list[RBACRule] = Field(default_factory=list)  # clusterRBAC: a per-run ClusterRole
    # Its declared tools, as the agent's manifest holds them (agentrunner/tools/sidecar.py): Sympozium's JSON shape.
    tools: list[dict[str, Any]] = Field(default_factory=list)


class ResolvedSkillPack(K8sModel):
    """One entry of a run's skills: the ConfigMap projected into /skills, and the pack's sidecar if it has one."""

    name: str  # the SkillPack (for a bare configMapRef: the ConfigMap)
    config_map: str
    sidecar: ResolvedSidecar | None = None
    params: dict[str, str] = Field(default_factory=dict)  # the run's skills[].params for this pack

    def param_env(self) -> list[EnvVar]:
        """The params as the sidecar's env: `SKILL_<KEY>`, the key upper-cased (Sympozium's), in key order."""
        return [EnvVar(name=PARAM_ENV_PREFIX + k.upper(), value=v) for k, v in sorted(self.params.items())]


def _tool_entries(pack: str, sc: SkillSidecar) -> list[dict[str, Any]]:
    """The pack's tools as Sympozium's controller writes its manifest: the target is the pack (never the tool's
    own say), inputMode `args` unless set, parameters an empty object schema unless given."""
    out = []
    for t in sc.tools or []:
        entry: dict[str, Any] = {"name": t.name, "description": t.description, "target": pack, "exec": list(t.exec),
                                 "inputMode": t.input_mode or "args",
                                 "parameters": t.parameters if t.parameters is not None else EMPTY_PARAMETERS}
        if t.subcommand:
            entry["subcommand"] = t.subcommand
        if t.positional_args:
            entry["positionalArgs"] = list(t.positional_args)
        out.append(entry)
    return out


def _sidecar(pack: str, sc: SkillSidecar) -> ResolvedSidecar:
    env = list(sc.env or [])
    res = sc.resources
    return ResolvedSidecar(
        image=sc.image, image_pull_policy=sc.image_pull_policy, command=list(sc.command or []),
        env=env, mount_workspace=sc.mount_workspace is not False,
        cpu=(res.cpu if res and res.cpu else SIDECAR_CPU), memory=(res.memory if res and res.memory else SIDECAR_MEMORY),
        rules=[r.as_rule() for r in sc.rbac or []], cluster_rules=[r.as_rule() for r in sc.cluster_rbac or []],
        tools=_tool_entries(pack, sc))


def _params(ref: SkillRef, at: str) -> dict[str, str]:
    for key in ref.params:
        if not ENV_NAME.match(PARAM_ENV_PREFIX + key.upper()):
            raise FieldProblem(f"{at}.params.{key}", f"{key!r} must make an env name ({PARAM_ENV_PREFIX}"
                                                     f"{key.upper()}): letters, digits, '_', '-' or '.'")
    return dict(ref.params)


def tools_manifest(packs: list[ResolvedSkillPack]) -> str:
    """AGENT_SIDECAR_TOOLS: every sidecar's tools, in the order of the run's skills ("" when none)."""
    tools = [t for p in packs if p.sidecar is not None for t in p.sidecar.tools]
    return json.dumps({"tools": tools}, separators=(",", ":")) if tools else ""


def skill_pack_names(refs: list[SkillRef]) -> list[str]:
    """The SkillPacks to read for these refs: each name as given and without Sympozium's ConfigMap prefix."""
    out: list[str] = []
    for r in refs:
        if r.skill_pack_ref:
            out.append(r.skill_pack_ref)
            if r.skill_pack_ref.startswith(CONFIGMAP_PREFIX):
                out.append(r.skill_pack_ref[len(CONFIGMAP_PREFIX):])
    return out


def _pack_named(ref: str, packs: dict[str, dict[str, object]]) -> tuple[str, dict[str, object] | None]:
    """The SkillPack a `skillPackRef` names, as given or without Sympozium's ConfigMap prefix; (name, None) if none."""
    obj = packs.get(ref)
    if obj is None and ref.startswith(CONFIGMAP_PREFIX):
        ref = ref[len(CONFIGMAP_PREFIX):]
        obj = packs.get(ref)
    return ref, obj


def missing_packs(refs: list[SkillRef], packs: dict[str, dict[str, object]]) -> list[str]:
    """The `skillPackRef`s that name no SkillPack in `packs`: skipped by `resolve_skills`, and worth a warning at
    admission."""
    return [r.skill_pack_ref for r in refs if r.skill_pack_ref and _pack_named(r.skill_pack_ref, packs)[1] is None]


def resolve_skills(refs: list[SkillRef], packs: dict[str, dict[str, object]], *, field: str,
                   policy: PolicyRules | None = None) -> list[ResolvedSkillPack]:
    """`packs`: the SkillPack objects found, by name. Raises FieldProblem (PolicyViolation for a policy rule)."""
    out: list[ResolvedSkillPack] = []
    seen: set[str] = set()
    for i, ref in enumerate(refs):
        at = f"{field}[{i}]"
        params = _params(ref, at)
        if ref.config_map_ref and ref.config_map_ref not in seen:
            seen.add(ref.config_map_ref)
            out.append(ResolvedSkillPack(name=ref.config_map_ref, config_map=ref.config_map_ref,
                                         params=params if not ref.skill_pack_ref else {}))
        if not ref.skill_pack_ref:
            continue
        name, obj = _pack_named(ref.skill_pack_ref, packs)
        if obj is None or name in seen:
            continue  # not there: skipped, as Sympozium does (see the module's docstring)
        seen.add(name)
        spec = parse(SkillPackSpec, obj.get("spec") or {}, f'SkillPack "{name}" spec')
        sidecar = _sidecar(name, spec.sidecar) if spec.sidecar is not None and spec.sidecar.image else None
        if sidecar is not None and policy is not None:
            where = policy.named()
            if not policy.image_allowed(sidecar.image):
                raise PolicyViolation(f"{at}.skillPackRef",
                                      f'SkillPack "{name}" sidecar image "{sidecar.image}" is not from a registry '
                                      f"allowed by {where}, rule imagePolicy.allowedRegistries "
                                      f"({', '.join(policy.allowed_registries)})")
            for key, rules in (("rbac", sidecar.rules), ("clusterRBAC", sidecar.cluster_rules)):
                for j, rule in enumerate(rules):
                    for r in rule.resources:
                        if policy.resource_denied(r):
                            raise PolicyViolation(f"{at}.skillPackRef",
                                                  f'SkillPack "{name}" sidecar RBAC (spec.sidecar.{key}[{j}]) access '
                                                  f'to "{r}" is denied by {where}, rule lifecyclePolicy.deniedResources')
        out.append(ResolvedSkillPack(name=name, config_map=name, sidecar=sidecar, params=params))
    manifest = tools_manifest(out)
    if len(manifest.encode()) > MAX_TOOLS_MANIFEST_BYTES:
        raise FieldProblem(field, f"the sidecar tools of these SkillPacks take {len(manifest.encode())} bytes as the "
                                  f"agent's manifest; at most {MAX_TOOLS_MANIFEST_BYTES} (fewer tools, or shorter "
                                  "descriptions and parameter schemas)")
    return out


def _short(name: str, limit: int) -> str:
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:limit - 9].rstrip('-')}-{digest}"


def sidecar_container(pack: str) -> str:
    """The sidecar's container name, `skill-<pack>` as Sympozium names it (a DNS label)."""
    return _short(f"skill-{pack}", 63)


def sidecar_account(run: str, pack: str) -> str:
    """The per-run ServiceAccount, Role, RoleBinding and token Secret of one pack's sidecar."""
    return _short(f"sympozium-skill-{pack}-{run}", 253)


def sidecar_cluster_role(namespace: str, run: str, uid: str, pack: str) -> str:
    """The per-run ClusterRole and ClusterRoleBinding of one pack's sidecar (its clusterRBAC). Cluster-scoped, so the
    name carries the namespace and the start of the run's uid: runs of one name in two namespaces, or a run and a
    same-named successor whose predecessor's is not removed yet, never share one."""
    return _short(f"sympozium-skill-{pack}-{namespace}-{run}-{uid[:8]}", 253)

