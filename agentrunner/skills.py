"""The skills mounted at /skills (a run's SkillPacks, one `<skill>.md` per skill): given to the model, and listed
in the result when `AGENT_LIST_SKILLS` is set, so a run shows which files arrived and what they hold.

- ``SKILLS_DIR`` (default ``/skills``): where the files are; a missing directory means no skills.
- ``AGENT_LIST_SKILLS`` (``true``/``1``): the response ends with one line per file: name, size, sha256.
- ``AGENT_SKILL_PARAMS``: the run's ``skills[].params`` as JSON, ``{"<pack>": {"<key>": "<value>"}}``; each pack's
  parameters are listed in the system message after the skills (the control plane also sets them as env of the
  pack's sidecar).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SKILLS_DIR = "/skills"
LISTING_HEADER = "skills seen under /skills:"


@dataclass(frozen=True)
class SkillFile:
    name: str
    content: str

    def line(self) -> str:
        data = self.content.encode()
        return f"- {self.name} ({len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()})"


def load_skills(env: Mapping[str, str]) -> list[SkillFile]:
    """The Markdown files of the skills directory (a projected volume also holds `..data` links: skipped)."""
    root = Path(env.get("SKILLS_DIR") or DEFAULT_SKILLS_DIR)
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir()):
        if p.name.startswith(".") or not p.is_file():
            continue
        try:
            out.append(SkillFile(p.name, p.read_text(errors="replace")))
        except OSError:
            continue  # unreadable: not a skill the model can use
    return out


def skill_params(env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """AGENT_SKILL_PARAMS, read leniently: a malformed value is a warning and no parameters (the skills still run)."""
    text = (env.get("AGENT_SKILL_PARAMS") or "").strip()
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        import logging

        logging.getLogger(__name__).warning("AGENT_SKILL_PARAMS is not {pack: {key: value}} JSON: ignored")
        return {}
    return {str(k): {str(a): str(b) for a, b in v.items()} for k, v in data.items()}


def system_with_skills(system: str, skills: list[SkillFile], env: Mapping[str, str] | None = None) -> str:
    """The system message with the skills appended, each under its file name, as instructions to follow, then
    each skill pack's parameters."""
    params = skill_params(env or {})
    if not skills and not params:
        return system
    parts = [system.rstrip()] if system.strip() else []
    if skills:
        parts.append("You have these skills (from /skills):")
        parts += [f"## {s.name}\n{s.content.strip()}" for s in skills]
    if params:
        lines = [f"- {pack}: " + ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
                 for pack, values in sorted(params.items())]
        parts.append("Skill parameters (set for this run):\n" + "\n".join(lines))
    return "\n\n".join(parts)


def wants_listing(env: Mapping[str, str]) -> bool:
    return (env.get("AGENT_LIST_SKILLS") or "").strip().lower() in ("1", "true", "yes")


def listing(skills: list[SkillFile]) -> str:
    return "\n".join([LISTING_HEADER, *(s.line() for s in skills)] if skills else [LISTING_HEADER, "(none)"])
