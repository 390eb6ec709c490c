"""One run of the agent, start to exit: configure, ask the provider within RUN_TIMEOUT, report.

Every way a run can end is mapped to the result contract here, so the process always
leaves a marker line and an exit code the control plane can act on — except the echo
provider's ``exit:<code>`` hook, whose point is to leave none.

Exit codes: 0 for ``success`` and ``skipped``, 1 for ``error`` (including a bad
environment, a provider failure and exceeding RUN_TIMEOUT), ``<code>`` for ``exit:<code>``.
Progress goes to stderr as a few log lines; stdout carries only the marker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from agentrunner.config import Config, ConfigError, load_config, paths_from_env
from agentrunner.context import ContextFile, load_context
from agentrunner.providers import ExitRequested, Prompt, ProviderError, SkipRequested, make_provider
from agentrunner.result import Metrics, RunResult, print_marker, write_result_file
from agentrunner.skills import listing, load_skills, system_with_skills, wants_listing

log = logging.getLogger("agentrunner")


def _setup_logging() -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s agentrunner %(levelname)s %(message)s",
    )


def _log_start(config: Config, context: list[ContextFile]) -> None:
    log.info(
        "run %s (agent %s, namespace %s): provider=%s model=%s base_url=%s thinking=%s timeout=%s",
        config.run_id or "-", config.instance_name or "-", config.namespace or "-", config.provider,
        config.model or "-", config.base_url or "-", config.thinking_mode or "-", config.run_timeout_text,
    )
    log.info("tool policy: allow=%s deny=%s (this runner offers the model no tools)",
             ",".join(config.tool_policy_allow) or "-", ",".join(config.tool_policy_deny) or "-")
    log.info("task: %d chars; context: %d file(s) from %s; api key: %s", len(config.task), len(context),
             config.context_dir, "set" if config.api_key else "not set")


async def run(config: Config, context: list[ContextFile], started: float,
              env: Mapping[str, str] | None = None) -> RunResult:
    """Ask the provider, bounded by RUN_TIMEOUT from ``started``; raises only ExitRequested."""
    result = await _ask(config, context, started, env or {})
    if wants_listing(env or {}) and result.status == "success":
        result.response = f"{result.response}\n\n{listing(load_skills(env or {}))}"
    return result


async def _ask(config: Config, context: list[ContextFile], started: float, env: Mapping[str, str]) -> RunResult:
    remaining = max(config.run_timeout_seconds - (time.monotonic() - started), 0.001)
    provider = make_provider(config, remaining)
    skills = load_skills(env)
    if skills:
        log.info("skills: %s", ", ".join(s.name for s in skills))
    prompt = Prompt(system=system_with_skills(config.system_prompt, skills), task=config.task, context=context)
    try:
        async with asyncio.timeout(remaining):
            completion = await provider.complete(prompt)
    except TimeoutError:
        return RunResult("error", error=f"timeout: the run exceeded RUN_TIMEOUT={config.run_timeout_text}")
    except ProviderError as exc:
        return RunResult("error", error=str(exc) or f"{provider.name} provider failed")
    except SkipRequested as exc:
        return RunResult("skipped", response=str(exc) or "skipped by the agent")
    except ExitRequested:
        raise
    except Exception as exc:
        log.exception("unexpected failure in the %s provider", provider.name)
        return RunResult("error", error=f"agentrunner internal error: {type(exc).__name__}: {exc}")
    return RunResult(
        "success",
        response=completion.text,
        metrics=Metrics(
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            tool_calls=completion.tool_calls,
        ),
    )


def _finish(result: RunResult, result_path: Path, started: float) -> int:
    """Stamp the duration, write result.json, print the marker; returns the exit code."""
    result.metrics.duration_ms = int((time.monotonic() - started) * 1000)
    write_result_file(result, result_path)
    m = result.metrics
    log.info("finished: status=%s durationMs=%d inputTokens=%d outputTokens=%d%s", result.status,
             m.duration_ms, m.input_tokens, m.output_tokens, f" error={result.error}" if result.error else "")
    print_marker(result)
    return result.exit_code


def main(env: Mapping[str, str] | None = None) -> int:
    """Run once from the environment; returns the process exit code."""
    started = time.monotonic()
    _setup_logging()
    environ = os.environ if env is None else env
    try:
        config = load_config(environ)
    except ConfigError as exc:
        log.error("invalid environment: %s", exc)
        _, ipc_dir = paths_from_env(environ)
        return _finish(RunResult("error", error=f"invalid environment: {exc}"),
                       ipc_dir / "output" / "result.json", started)

    context = load_context(config.context_dir)
    _log_start(config, context)
    try:
        result = asyncio.run(run(config, context, started, environ))
    except ExitRequested as exc:
        log.warning("exiting with code %d and no result (exit: test hook)", exc.code)
        return exc.code
    return _finish(result, config.result_path, started)
