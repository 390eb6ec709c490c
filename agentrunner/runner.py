"""One run of the agent, start to exit: configure, build the tools, run the loop within RUN_TIMEOUT, report.

Every way a run can end is mapped to the result contract here, so the process always leaves a marker line and an
exit code the control plane can act on — except the echo provider's ``exit:<code>`` hook, whose point is to leave
none.

Exit codes: 0 for ``success``, ``skipped`` and ``waiting`` (parked until a person decides, SPEC §10), 1 for
``error`` (including a bad environment, a provider failure,
the iteration cap and exceeding RUN_TIMEOUT), ``<code>`` for ``exit:<code>``. Progress goes to stderr as log
lines; stdout carries only the marker.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack

from agentrunner.approvals import resume_from_env, waits_from_env
from agentrunner.config import Config, ConfigError, load_config, paths_from_env
from agentrunner.context import ContextFile, load_context
from agentrunner.hooks import HookRegistry
from agentrunner.journal import Journal, JournalError
from agentrunner.loop import Loop, default_hooks
from agentrunner.policy import ToolPolicy
from agentrunner.providers import (
    Conversation,
    ExitRequested,
    Prompt,
    ProviderError,
    SkipRequested,
    make_provider,
)
from agentrunner.result import RunResult, print_marker, write_result_file
from agentrunner.skills import listing, load_skills, system_with_skills, wants_listing
from agentrunner.tools import Tool
from agentrunner.tracing import NoSpans
from agentrunner.tracing import start as start_spans

log = logging.getLogger("agentrunner")


def _setup_logging() -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s agentrunner %(levelname)s %(message)s",
    )


def _log_start(config: Config, context: list[ContextFile]) -> None:
    log.info(
        "run %s (agent %s, namespace %s): provider=%s model=%s base_url=%s thinking=%s timeout=%s "
        "max_tool_iterations=%d llm_max_retries=%d llm_request_timeout=%gs stream=%s",
        config.run_id or "-", config.instance_name or "-", config.namespace or "-", config.provider,
        config.model or "-", config.base_url or "-", config.thinking_mode or "-", config.run_timeout_text,
        config.max_tool_iterations, config.max_retries, config.request_timeout_seconds, config.stream,
    )
    log.info("tool policy: allow=%s deny=%s", ",".join(config.tool_policy_allow) or "-",
             ",".join(config.tool_policy_deny) or "-")
    log.info("task: %d chars; context: %d file(s) from %s; api key: %s", len(config.task), len(context),
             config.context_dir, "set" if config.api_key else "not set")


async def build_tools(config: Config, stack: AsyncExitStack) -> list[Tool]:
    """The built-in tools, then the SkillPack sidecars' and the MCP servers' (names already taken are skipped)."""
    from agentrunner.tools.fetch import AllowList, Fetcher, fetch_tool
    from agentrunner.tools.files import Roots, file_tools
    from agentrunner.tools.shell import Executor, shell_tool

    env = config.env
    tools = file_tools(Roots(config.workspace_dir, config.skills_dir))
    tools.append(fetch_tool(Fetcher(AllowList.from_env(env))))
    executor = Executor.from_env(env)
    if executor.targets:
        tools.insert(0, shell_tool(executor))
    else:
        log.info("execute_command is not offered: no container executes commands (EXEC_TARGETS is empty)")
    taken = {t.name for t in tools}
    from agentrunner.tools.sidecar import manifest_from_env, sidecar_tools

    entries = manifest_from_env(env)
    if entries:
        tools += sidecar_tools(entries, executor, taken)
    from agentrunner.tools.mcp import servers_from_env

    servers = servers_from_env(env)
    if servers:
        from agentrunner.tools.mcp import connect

        tools += await connect(servers, env, stack, taken)
    return tools


def hooks_for(policy: ToolPolicy) -> HookRegistry:
    hooks = default_hooks(policy)
    loaded = hooks.load_entry_points()
    if loaded:
        log.info("phase hooks installed: %s", ", ".join(loaded))
    return hooks


async def run(config: Config, context: list[ContextFile], started: float,
              env: Mapping[str, str] | None = None, spans: NoSpans | None = None) -> RunResult:
    """The loop, bounded by RUN_TIMEOUT, in the run's `invoke_agent` span; raises only ExitRequested."""
    spans = spans or NoSpans()
    with spans.run(config) as span:
        result = await _run(config, context, started, env, spans)
        spans.run_done(span, result)
    return result


async def _run(config: Config, context: list[ContextFile], started: float, env: Mapping[str, str] | None,
               spans: NoSpans) -> RunResult:
    environ = env or config.env
    skills = load_skills(environ)
    if skills:
        log.info("skills: %s", ", ".join(s.name for s in skills))
    system = system_with_skills(config.system_prompt, skills, environ)
    conversation = Conversation(Prompt(system=system, task=config.task, context=context))
    loop: Loop | None = None
    try:
        async with AsyncExitStack() as stack:
            policy = ToolPolicy.from_env(config.env)
            waits, resume = waits_from_env(config.env), resume_from_env(config.env)
            tools = await build_tools(config, stack)
            remaining = max(config.run_timeout_seconds - (time.monotonic() - started), 0.001)
            model = make_provider(config, min(config.request_timeout_seconds, remaining))
            loop = Loop(model=model, tools=tools, policy=policy, hooks=hooks_for(policy),
                        journal=Journal(config.state_dir), conversation=conversation,
                        max_rounds=config.max_tool_iterations, run_timeout=config.run_timeout_seconds,
                        run_timeout_text=config.run_timeout_text, waits=waits, resume=resume, spans=spans,
                        provider=config.provider, model_name=config.model)
            log.info("tools offered: %s", ", ".join(t.name for t in loop.state.offered) or "none")
            result = await loop.run()
    except ProviderError as exc:
        result = RunResult("error", error=str(exc) or "the model provider failed",
                           metrics=loop.state.metrics if loop else RunResult("error").metrics)
    except SkipRequested as exc:
        result = RunResult("skipped", response=str(exc) or "skipped by the agent")
    except (ConfigError, JournalError) as exc:
        result = RunResult("error", error=f"invalid environment: {exc}" if isinstance(exc, ConfigError) else str(exc))
    except ExitRequested:
        raise
    except Exception as exc:
        log.exception("unexpected failure of the agent")
        result = RunResult("error", error=f"agentrunner internal error: {type(exc).__name__}: {exc}")
    if loop is not None:
        result.metrics.active_ms = loop.active_ms()
        loop.close(result)
    if wants_listing(environ) and result.status == "success":
        result.response = f"{result.response}\n\n{listing(skills)}"
    return result


def _finish(result: RunResult, result_path: os.PathLike[str] | str, started: float) -> int:
    """Stamp the duration, write result.json, print the marker; returns the exit code."""
    from pathlib import Path

    result.metrics.duration_ms = int((time.monotonic() - started) * 1000)
    write_result_file(result, Path(result_path))
    m = result.metrics
    log.info("finished: status=%s durationMs=%d inputTokens=%d outputTokens=%d cachedInputTokens=%d toolCalls=%d%s",
             result.status, m.duration_ms, m.input_tokens, m.output_tokens, m.cached_input_tokens, m.tool_calls,
             f" error={result.error}" if result.error else "")
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
    spans = start_spans(environ)
    try:
        result = asyncio.run(run(config, context, started, environ, spans))
    except ExitRequested as exc:
        log.warning("exiting with code %d and no result (exit: test hook)", exc.code)
        spans.close()
        return exc.code
    # The last spans go before the marker (bounded; nothing waits on a collector known to be down), so the result
    # says how many were delivered.
    result.metrics.spans = spans.close()
    return _finish(result, config.result_path, started)
