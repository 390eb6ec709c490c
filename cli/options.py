"""The options every `agentrun` command shares, and where the CLI finds the cluster and the API.

As in kopf's cli.py: one decorator adds the shared options to every command, so `agentrun --state-dir X up` and
`agentrun up --state-dir X` mean the same; the group carries a copy of each, read from the command line or from
AGENTRUN_* variables (the group's `auto_envvar_prefix`), and a command's own value wins when it is given.

Where things are found, first that applies:
- the state directory: `--state-dir`, AGENTRUN_STATE_DIR, ~/.agentrun;
- Kubernetes (reads, `apply`): `--kubeconfig` (AGENTRUN_KUBECONFIG) with `--context` (AGENTRUN_CONTEXT), else the
  stack's `<state-dir>/endpoints.json`, else KUBECONFIG, else ~/.kube/config;
- the API (user actions): `--api` (AGENTRUN_API, or AGENTRUN_API_URL as before) with `--token` (AGENTRUN_TOKEN or
  AGENTRUN_API_TOKEN), else the stack's `api` and `api_token`. The stack's token goes with the stack's API only.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypeVar

import click

from .errors import CliError
from .up import DEFAULT_STATE_DIR

F = TypeVar("F", bound=Callable[..., Any])

NAMES = ("state_dir", "namespace", "context", "kubeconfig", "api", "token")


@dataclass(frozen=True)
class Target:
    """The shared options of one invocation, the command's over the group's."""

    state_dir: Path | None = None
    namespace: str | None = None
    context: str | None = None
    kubeconfig: Path | None = None
    api: str | None = None
    token: str | None = None

    def over(self, base: Target) -> Target:
        """These values where given, `base`'s elsewhere."""
        return replace(base, **{f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None})

    @property
    def state(self) -> Path:
        return (self.state_dir or DEFAULT_STATE_DIR).expanduser().resolve()

    @property
    def ns(self) -> str:
        return self.namespace or "default"

    def endpoints(self) -> dict[str, Any]:
        """The stack's endpoints.json, or {} without a stack."""
        path = self.state / "endpoints.json"
        if not path.exists():
            return {}
        try:
            data: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise CliError(f"cannot read {path}: {e}") from e
        return data

    def kubeconfig_path(self) -> str:
        if self.kubeconfig:
            return str(self.kubeconfig)
        stack = self.endpoints().get("kubeconfig")
        if stack:
            return str(stack)
        env = os.environ.get("KUBECONFIG", "")
        if env:
            return env
        home = Path.home() / ".kube" / "config"
        if home.is_file():  # as kubectl
            return str(home)
        raise CliError(f"no cluster to talk to: no stack in {self.state} (run `agentrun up`), no --kubeconfig, "
                       "no KUBECONFIG and no ~/.kube/config")

    def api_url_and_token(self) -> tuple[str, str]:
        stack = self.endpoints()
        stack_api = str(stack.get("api") or "").rstrip("/")
        url = (self.api or "").rstrip("/") or stack_api
        if not url:
            raise CliError(f"no API to talk to: no stack in {self.state} (run `agentrun up`) and no --api "
                           "(AGENTRUN_API)")
        token = self.token if self.token is not None else (str(stack.get("api_token") or "") if url == stack_api
                                                           else "")
        return url, token

    def resolved(self) -> dict[str, Any]:
        """What `agentrun config` shows: each setting as the commands will use it (None: not found)."""
        try:
            kubeconfig: str | None = self.kubeconfig_path()
        except CliError:
            kubeconfig = None
        try:
            api, token = self.api_url_and_token()
        except CliError:
            api, token = None, ""
        return {"stateDir": str(self.state), "namespace": self.ns, "kubeconfig": kubeconfig, "context": self.context,
                "api": api, "token": f"{token[:4]}..." if token else None}


def _options(*, group: bool) -> list[Callable[[F], F]]:
    """The shared options; on commands they never read the environment (the group's copy does, once)."""
    env: dict[str, Any] = {} if group else {"allow_from_autoenv": False}
    return [
        click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path), default=None, **env,
                     help=f"the embedded stack's state directory (default {DEFAULT_STATE_DIR}; AGENTRUN_STATE_DIR)"),
        click.option("-n", "--namespace", default=None, **env,
                     help="the Kubernetes namespace (default 'default'; AGENTRUN_NAMESPACE)"),
        click.option("--context", default=None, **env, help="the kubeconfig context (AGENTRUN_CONTEXT)"),
        click.option("--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), default=None, **env,
                     help="a kubeconfig for Kubernetes reads and apply (default: the stack's, else KUBECONFIG, else "
                          "~/.kube/config; AGENTRUN_KUBECONFIG)"),
        click.option("--api", default=None, metavar="URL",
                     **({"envvar": ["AGENTRUN_API", "AGENTRUN_API_URL"]} if group else env),
                     help="the agentrun API for user actions (default: the stack's; AGENTRUN_API)"),
        click.option("--token", default=None,
                     **({"envvar": ["AGENTRUN_TOKEN", "AGENTRUN_API_TOKEN"]} if group else env),
                     help="the API's bearer token (default: the stack's with the stack's API; AGENTRUN_TOKEN)"),
    ]


def group_options(fn: F | None = None, *, root: bool = True) -> Any:
    """The shared options on a group: it stores the Target its commands start from. The root group's copy reads
    the AGENTRUN_* variables; a subgroup's (`agentrun schedules -n NS list`) overrides the root's."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            ctx = click.get_current_context()
            mine = Target(**{k: kwargs.pop(k, None) for k in NAMES})
            base = ctx.find_object(Target) if not root else None
            ctx.obj = mine.over(base) if base is not None else mine
            return fn(*args, **kwargs)

        for opt in reversed(_options(group=root)):
            wrapper = opt(wrapper)
        return wrapper  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


def global_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the shared options to a command and passes the merged Target as its first argument, `target`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        base = ctx.find_object(Target) or Target()
        mine = Target(**{k: kwargs.pop(k, None) for k in NAMES})
        return fn(mine.over(base), *args, **kwargs)

    for opt in reversed(_options(group=False)):
        wrapper = opt(wrapper)
    return wrapper


def output_option(default: str = "table") -> Callable[[F], F]:
    return click.option("-o", "--output", type=click.Choice(["table", "wide", "json", "yaml"]), default=default,
                        show_default=True, help="table and wide: rows; json and yaml: the objects (a list as "
                                                "{apiVersion: v1, kind: List, items: [...]})")
