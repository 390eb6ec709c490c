"""The result contract (SPEC §3.6): the marker line on stdout and ``result.json``.

The control plane reads the agent's outcome from the tail of its log, so the marker line
is the interface that matters; ``<ipc>/output/result.json`` is the same JSON for postRun
hooks and humans. Both are produced here from one ``RunResult`` so they cannot differ.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

if TYPE_CHECKING:
    from agentrunner.approvals import Wait

log = logging.getLogger(__name__)

RESULT_START = "__SYMPOZIUM_RESULT__"
RESULT_END = "__SYMPOZIUM_END__"

# "waiting": the container ends without an answer, parked until the control plane starts it again (SPEC §10).
Status = Literal["success", "error", "skipped", "waiting"]


@dataclass
class Metrics:
    """Usage summed over every model call of the run (all its containers, with a journal).

    ``inputTokens`` counts cached input tokens too (OpenAI's convention; Anthropic's are added back in), and
    ``cachedInputTokens`` says how many of them were read from the provider's cache. ``models`` sums them per model
    name, so the control plane (the authority on cost) can price each model's tokens; the runner reports no cost.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    duration_ms: int = 0
    cached_input_tokens: int = 0
    model_calls: int = 0
    active_ms: int = 0
    models: dict[str, dict[str, int]] = field(default_factory=dict)
    # With tracing on: this container's spans exported and dropped (agentrunner/tracing.py); else empty.
    spans: dict[str, int] = field(default_factory=dict)

    def add_call(self, model: str, input_tokens: int, output_tokens: int, cached: int) -> None:
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cached_input_tokens += cached
        self.model_calls += 1
        m = self.models.setdefault(model or "unknown", {"calls": 0, "inputTokens": 0, "outputTokens": 0,
                                                        "cachedInputTokens": 0})
        m["calls"] += 1
        m["inputTokens"] += input_tokens
        m["outputTokens"] += output_tokens
        m["cachedInputTokens"] += cached

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "toolCalls": self.tool_calls,
            "durationMs": self.duration_ms,
            "totalTokens": self.input_tokens + self.output_tokens,
            "cachedInputTokens": self.cached_input_tokens,
            "modelCalls": self.model_calls,
            "activeMs": self.active_ms,
            "models": [{"model": k, **v} for k, v in sorted(self.models.items())],
            **self.spans,
        }


@dataclass
class RunResult:
    status: Status
    response: str = ""
    error: str = ""
    metrics: Metrics = field(default_factory=Metrics)
    wait: Wait | None = None  # with status "waiting": what for (agentrunner/approvals.py)

    @property
    def exit_code(self) -> int:
        """0 for success, skipped and waiting, 1 for error."""
        return 1 if self.status == "error" else 0

    def to_dict(self) -> dict[str, Any]:
        out = {
            "status": self.status,
            "response": self.response,
            "error": self.error,
            "metrics": self.metrics.to_dict(),
        }
        if self.wait is not None:
            out["wait"] = self.wait.to_dict()
        return out

    def to_json(self) -> str:
        """Single-line ASCII JSON in which the marker strings cannot appear literally.

        A response may quote ``__SYMPOZIUM_END__`` (a model echoing its instructions); the
        first underscore of any ``__SYMPOZIUM_`` inside the JSON is written as the JSON
        escape ``\\u005f``, which decodes to the same text but keeps a reader that scans for
        the end marker from cutting the line short.
        """
        text = json.dumps(self.to_dict(), ensure_ascii=True, separators=(",", ":"))
        return text.replace("__SYMPOZIUM_", "\\u005f_SYMPOZIUM_")


def marker_line(result: RunResult) -> str:
    return f"{RESULT_START}{result.to_json()}{RESULT_END}"


def print_marker(result: RunResult, stream: TextIO | None = None) -> None:
    """Print the marker on a line of its own (nothing else in this program writes to stdout)."""
    out = stream if stream is not None else sys.stdout
    out.write(marker_line(result) + "\n")
    out.flush()


def write_result_file(result: RunResult, path: Path) -> bool:
    """Write result.json atomically (temp file, then rename); on failure warn and return False.

    The IPC volume exists only when the run has lifecycle hooks, and the root filesystem is
    read-only, so failing to write here is normal and must not fail the run.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".result-", suffix=".json", dir=path.parent)
        try:
            os.fchmod(fd, 0o644)  # hooks and humans read it; mkstemp would leave it 0600
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(result.to_json() + "\n")
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.warning("could not write %s (continuing; the stdout marker still carries the result): %s",
                    path, exc)
        return False
    log.info("wrote %s", path)
    return True
