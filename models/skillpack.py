"""The `SkillPack` resource (sympozium.ai/v1alpha1): Markdown skills mounted into agent pods, and an optional
tool sidecar with its own RBAC.

The schema follows Sympozium's `SkillPackSpec` field for field (names, types, enums, required), so a user's
SkillPack YAML applies with `kubectl apply --validate=strict` and nothing is pruned. What each field does here is
in the README's compatibility table: the skills, the sidecar's image/command/env/resources/rbac/clusterRBAC/tools
and `imagePullPolicy`/`mountWorkspace` act; the rest is stored and has no effect yet (`skill_pack_warnings`). A
sidecar without a `command` runs agentrun's executor alone, not its image's entrypoint (`skill_pack_notes`).

`skill_config_map` is the one ConfigMap the bridge generates per SkillPack (bridge/skillpacks.py): named as the
SkillPack (as Sympozium names it, so a run's `skillPackRef` of either the pack or its ConfigMap finds it), one
`<skill>.md` key per skill.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from .agentrun import Arg, Condition, EnvVar, RBACRule
from .base import K8sModel

# A JSON object kept whole (a JSON Schema, a core/v1 Volume): Kubernetes' own schema for it is not repeated here.
Whole = Annotated[dict[str, Any], WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True})]


class SkillRequirements(K8sModel):
    bins: list[str] | None = None
    tools: list[str] | None = None


class Skill(K8sModel):
    name: str
    description: str | None = None
    requires: SkillRequirements | None = None
    content: str


class RuntimeRequirements(K8sModel):
    image: str | None = None
    sandbox: bool | None = None
    min_memory: str | None = None
    min_cpu: str | None = Field(None, alias="minCPU")


class SidecarResources(K8sModel):
    cpu: str | None = None
    memory: str | None = None


class SkillRBACRule(K8sModel):
    """Sympozium's SkillPack RBACRule: no resourceNames (unlike lifecycle.rbac)."""

    api_groups: list[str] = Field(alias="apiGroups")
    resources: list[str]
    verbs: list[str]

    def as_rule(self) -> RBACRule:
        return RBACRule(api_groups=list(self.api_groups), resources=list(self.resources), verbs=list(self.verbs))


class HostPathMount(K8sModel):
    host_path: str
    mount_path: str
    read_only: bool | None = None


class HostAccessSpec(K8sModel):
    enabled: bool | None = None
    host_network: bool | None = None
    host_pid: bool | None = Field(None, alias="hostPID")
    privileged: bool | None = None
    run_as_root: bool | None = None
    mounts: list[HostPathMount] | None = None


class SidecarPort(K8sModel):
    name: str
    container_port: int
    protocol: str | None = None


class SidecarTool(K8sModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)
    description: str = Field(max_length=2048)
    exec: list[str] = Field(min_length=1)
    subcommand: str | None = None
    input_mode: Literal["args", "stdin"] | None = None
    positional_args: list[str] | None = None
    # A JSON Schema handed to the model verbatim: kept whole (preserve-unknown-fields).
    parameters: Whole | None = None


class SkillSidecar(K8sModel):
    image: str
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    command: list[Arg] | None = None
    env: list[EnvVar] | None = None  # a value, or a Secret's key (valueFrom.secretKeyRef), as a hook's env
    mount_workspace: bool | None = None  # Sympozium's default: true
    resources: SidecarResources | None = None
    rbac: list[SkillRBACRule] | None = None
    cluster_rbac: list[SkillRBACRule] | None = Field(None, alias="clusterRBAC")
    secret_ref: str | None = None
    secret_mount_path: str | None = None
    host_access: HostAccessSpec | None = None
    requires_server: bool | None = None
    ports: list[SidecarPort] | None = None
    # core/v1 Volume and VolumeMount objects, kept whole.
    volumes: list[Whole] | None = None
    volume_mounts: list[Whole] | None = None
    tools: list[SidecarTool] | None = None


class SkillPackSpec(K8sModel):
    skills: list[Skill]
    category: str | None = None
    source: str | None = None
    version: str | None = None
    runtime_requirements: RuntimeRequirements | None = None
    sidecar: SkillSidecar | None = None


class SkillPackStatus(K8sModel):
    phase: str | None = None
    config_map_name: str | None = None
    skill_count: int | None = None
    conditions: list[Condition] | None = None


def skill_files(spec: SkillPackSpec) -> dict[str, str]:
    """The ConfigMap data of a SkillPack: `<name>.md` per skill, its description as a heading, as Sympozium writes
    it, so an agent that reads Sympozium's skill files reads ours."""
    data: dict[str, str] = {}
    for s in spec.skills:
        content = s.content
        if s.description:
            content = f"# {s.name}\n\n> {s.description}\n\n{content}"
        data[f"{s.name}.md"] = content
    return data


def skill_pack_warnings(spec: SkillPackSpec) -> list[str]:
    """Fields stored but without effect here, each named (the bridge writes them into the status condition)."""
    out: list[str] = []
    if spec.runtime_requirements is not None:
        out.append("spec.runtimeRequirements")
    sc = spec.sidecar
    if sc is None:
        return out
    for name, value in (("secretRef", sc.secret_ref),
                        ("secretMountPath", sc.secret_mount_path), ("hostAccess", sc.host_access),
                        ("requiresServer", sc.requires_server), ("ports", sc.ports), ("volumes", sc.volumes),
                        ("volumeMounts", sc.volume_mounts)):
        if value:
            out.append(f"spec.sidecar.{name}")
    return out


ENTRYPOINT_NOT_RUN = ("spec.sidecar.command is not set: the sidecar runs agentrun's executor alone (execute_command "
                      "and the pack's tools run in it), not its image's own entrypoint, which agentrun cannot wrap "
                      "without reading the image from its registry; set command to run it")


def skill_pack_notes(spec: SkillPackSpec) -> list[str]:
    """What a pack's author should know that is not a field without effect: a sidecar whose image's own process
    will not run (the admission webhook warns, the bridge writes it into the EntrypointNotRun condition)."""
    sc = spec.sidecar
    return [ENTRYPOINT_NOT_RUN] if sc is not None and sc.image and not sc.command else []
