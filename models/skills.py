"""A run's skills resolved against the SkillPacks they name: what its agent pod mounts and which sidecars run.

Resolved once, when the run starts (`evaluate_run`), like the rest of the spec: later edits of a SkillPack change
the files of runs that start later (through its ConfigMap) but never the sidecar or the RBAC of a run in flight.
A SkillPack that does not exist is skipped, as Sympozium does (its ConfigMap projection is optional and no sidecar
is added), so Sympozium's samples that name built-in packs (`k8s-ops`) still run here.

A sidecar's RBAC is checked against the policy's `lifecyclePolicy.deniedResources` exactly like `lifecycle.rbac`
(both are Roles the worker mints for a run), and its image against `imagePolicy.allowedRegistries` like a hook's.
"""

from __future__ import annotations

import hashlib

from pydantic import Field

from .agentrun import EnvVar, RBACRule, SkillRef
from .base import K8sModel, PolicyViolation, parse
from .policy import PolicyRules
from .skillpack import SkillPackSpec, SkillSidecar

SKILLPACKS = "skillpacks"
# Sympozium's AgentRun controller accepts the ConfigMap's name with this prefix for the SkillPack's.
CONFIGMAP_PREFIX = "skillpack-"
SIDECAR_CPU = "100m"  # Sympozium's defaults for a sidecar's request (= limit)
SIDECAR_MEMORY = "128Mi"


class ResolvedSidecar(K8sModel):
    image: str
    image_pull_policy: str | None = None
    command: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    mount_workspace: bool = True
    cpu: str = SIDECAR_CPU
    memory: str = SIDECAR_MEMORY
    rules: list[RBACRule] = Field(default_factory=list)


class ResolvedSkillPack(K8sModel):
    """One entry of a run's skills: the ConfigMap projected into /skills, and the pack's sidecar if it has one."""

    name: str  # the SkillPack (for a bare configMapRef: the ConfigMap)
    config_map: str
    sidecar: ResolvedSidecar | None = None


def _sidecar(sc: SkillSidecar) -> ResolvedSidecar:
    env = list(sc.env or [])
    res = sc.resources
    return ResolvedSidecar(
        image=sc.image, image_pull_policy=sc.image_pull_policy,
        command=list(sc.command or ["sleep", "infinity"]),  # Sympozium's default keeps the sidecar alive
        env=env, mount_workspace=sc.mount_workspace is not False,
        cpu=(res.cpu if res and res.cpu else SIDECAR_CPU), memory=(res.memory if res and res.memory else SIDECAR_MEMORY),
        rules=[r.as_rule() for r in sc.rbac or []])


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
        if ref.config_map_ref and ref.config_map_ref not in seen:
            seen.add(ref.config_map_ref)
            out.append(ResolvedSkillPack(name=ref.config_map_ref, config_map=ref.config_map_ref))
        if not ref.skill_pack_ref:
            continue
        name, obj = _pack_named(ref.skill_pack_ref, packs)
        if obj is None or name in seen:
            continue  # not there: skipped, as Sympozium does (see the module's docstring)
        seen.add(name)
        spec = parse(SkillPackSpec, obj.get("spec") or {}, f'SkillPack "{name}" spec')
        sidecar = _sidecar(spec.sidecar) if spec.sidecar is not None and spec.sidecar.image else None
        if sidecar is not None and policy is not None:
            where = policy.named()
            if not policy.image_allowed(sidecar.image):
                raise PolicyViolation(f"{at}.skillPackRef",
                                      f'SkillPack "{name}" sidecar image "{sidecar.image}" is not from a registry '
                                      f"allowed by {where}, rule imagePolicy.allowedRegistries "
                                      f"({', '.join(policy.allowed_registries)})")
            for j, rule in enumerate(sidecar.rules):
                for r in rule.resources:
                    if policy.resource_denied(r):
                        raise PolicyViolation(f"{at}.skillPackRef",
                                              f'SkillPack "{name}" sidecar RBAC (spec.sidecar.rbac[{j}]) access to '
                                              f'"{r}" is denied by {where}, rule lifecyclePolicy.deniedResources')
        out.append(ResolvedSkillPack(name=name, config_map=name, sidecar=sidecar))
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

