"""Where the agent's commands run: the executor's volume, the tools container, and the env that tells the agent
its targets (SPEC §9, "the key stays with the model call"; the protocol is agentrunner/executor.py's).

The agent container holds the provider key, so it never runs a command itself: `execute_command` (and a SkillPack's
declared tools) go through an emptyDir to an executor wrapped around another container's command, one holding no
key and no ServiceAccount token, in a PID namespace of its own (a real pod's default: it cannot read the agent's
/proc either). The targets are the sandbox sidecar when the run has one (`spec.sandbox.enabled`), else a plain
tools container of the agent image, and each SkillPack's sidecar (with its own per-run ServiceAccount, so
`target: <pack>` acts with the pack's RBAC). Each target mounts only its own sub-directory of the volume, so one
cannot read another's requests or output. No ServiceAccount of the run holds `pods/exec`: nothing here needs it.

Pure functions, like activities/manifests.py, which puts them into the agent's pod.
"""

from __future__ import annotations

from typing import Any

from agentrunner.executor import EXEC_DIR, TARGET_SANDBOX, TARGET_TOOLS, target_dir, wrap
from models.resolve import ResolvedRun

Manifest = dict[str, Any]

EXEC_VOLUME = "exec"
TOOLS_CONTAINER = "tools"
# The /tmp of the container that runs commands by default (tools or sandbox): its own, not the agent's (nothing the
# agent process leaves in its /tmp is for commands to read).
EXEC_TMP_VOLUME = "exec-tmp"


def default_target(run: ResolvedRun) -> str:
    """Where a command without `target` runs: the sandbox sidecar when the run has one, else the tools container."""
    return TARGET_SANDBOX if run.sandbox_sidecar is not None else TARGET_TOOLS


def exec_volumes() -> list[Manifest]:
    return [{"name": EXEC_VOLUME, "emptyDir": {}}, {"name": EXEC_TMP_VOLUME, "emptyDir": {}}]


def exec_tmp_mount() -> Manifest:
    return {"name": EXEC_TMP_VOLUME, "mountPath": "/tmp"}


def agent_exec_mount() -> Manifest:
    """The agent sees every target's directory (it writes their requests and reads their output)."""
    return {"name": EXEC_VOLUME, "mountPath": EXEC_DIR}


def target_mount(target: str) -> Manifest:
    """A target's own directory of the executor's volume, and no other."""
    return {"name": EXEC_VOLUME, "mountPath": target_dir(target), "subPath": target}


def agent_exec_env(run: ResolvedRun) -> list[Manifest]:
    """EXEC_TARGETS and EXEC_DEFAULT_TARGET (the packs' sidecars are SYMPOZIUM_SKILL_TARGETS, Sympozium's name)."""
    target = default_target(run)
    return [{"name": "EXEC_TARGETS", "value": target}, {"name": "EXEC_DEFAULT_TARGET", "value": target}]


def tools_container(run: ResolvedRun, *, workspace: Manifest, skills: list[Manifest], resources: Manifest,
                    security: Manifest) -> Manifest:
    """The plain tools container of a run without a sandbox: a native sidecar (an init container with
    `restartPolicy: Always`, so the Job completes when the agent ends) whose command is the executor alone. It has
    /workspace (shared with the agent), a /tmp of its own, the skills read-only and its executor directory; no env
    of the agent's, no Secret, no token."""
    return {"name": TOOLS_CONTAINER, "image": run.tools_image or run.image, "restartPolicy": "Always",
            "command": wrap(TARGET_TOOLS, []),
            "volumeMounts": [workspace, exec_tmp_mount(), *skills, target_mount(TARGET_TOOLS)],
            "securityContext": dict(security), "resources": resources}


def wrapped(target: str, command: list[str]) -> list[str]:
    """A sandbox's or sidecar's own command under the executor for `target` (an empty one: the executor alone)."""
    return wrap(target, list(command))
