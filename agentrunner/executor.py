"""The executor: how ``execute_command`` (and a SkillPack's sidecar tools) run in another container of the pod,
one that cannot read the provider key (SPEC §9, "the key stays with the model call").

The idea is Argo's emissary (argo-workflows ``workflow/executor/emissary``): a small program in front of a
container's own command serves requests that arrive through a shared volume, so no exec API (``pods/exec``) is
needed. Ours is a POSIX ``sh`` script (it runs under dash and busybox ash; no bash-isms, no jq), passed inline as
the container's command, so a sidecar image needs nothing of ours beyond ``/bin/sh``.

The control plane's part (this is the interface; keep it stable)
-------------------------------------------------------------------
- An ``emptyDir`` volume mounted at ``EXEC_DIR`` (``/agentrun/exec``) in the agent container, and in each container
  that executes commands at ``EXEC_DIR/<target>`` (its own sub-directory only, by ``subPath: <target>``, so one
  sidecar cannot read another's requests or output). Targets: ``tools`` (a plain tools container sharing
  ``/workspace``), ``sandbox`` (the sandbox sidecar when ``sandbox.enabled``), ``<pack>`` (a SkillPack's sidecar;
  the pack's name).
- Each such container's ``command`` is ``wrap(target, argv)``: the executor for ``target`` and, when ``argv`` is
  non-empty, the container's original command, which keeps running as before: the script starts it, passes
  SIGTERM and SIGINT on to it, and exits with its exit code when it ends (the executor serves beside it). With an empty ``argv`` the executor is the main
  process (a ``tools`` container), and it ends on SIGTERM at once. Run them as native sidecars (init containers
  with ``restartPolicy: Always``) so the Job completes when the agent ends.
- The agent container's env: ``EXEC_TARGETS`` (comma list of the targets above), ``EXEC_DEFAULT_TARGET`` (where a
  command without ``target`` runs: ``sandbox`` when there is one, else ``tools``), and Sympozium's
  ``SYMPOZIUM_SKILL_TARGETS`` (packs with a sidecar; added to the targets). ``EXEC_START_TIMEOUT`` (Go duration,
  default 30s) bounds the wait for a target's executor to come up.
- Every container of the pod shares the pod's ``fsGroup``: files are made group-readable and -writable (umask 007
  in the executor, explicit modes in the agent), so a sidecar running as another UID works.

The protocol (inside ``EXEC_DIR/<target>``)
--------------------------------------------
- ``requests``: a FIFO the executor creates and holds open (read and write, so it never sees end-of-file and
  blocks without using CPU). The agent writes one line per request: the request's id (``[A-Za-z0-9_-]+``), at
  most ``PIPE_BUF`` bytes so concurrent writers never interleave. Opening it for writing without blocking fails
  (``ENXIO``) while no executor holds it: that is how the agent knows a target is not up yet.
- ``<id>/``: the request's directory, complete before its id is written: ``script`` (run with ``bash`` when the
  container has it, else ``sh``; sidecar tools send a script that only ``exec``s their argv, each argument
  single-quoted), ``timeout`` (seconds), ``cwd``, optional ``stdin``, and ``reply``, a FIFO the agent made and holds
  open.
- The executor runs each request in its own background job (so parallel tool calls run in parallel), in a new
  session (``setsid``, else it walks ``/proc`` to find the command's descendants), with stdin from ``stdin`` or
  ``/dev/null`` and stdout/stderr to ``<id>/out`` and ``<id>/err`` (files, not pipes: a daemon the command leaves
  behind cannot hold the reply back). On timeout the whole process group gets SIGTERM, then SIGKILL 2 s later,
  and ``<id>/timedout`` appears. Then it writes ``<id>/exit`` (``<code>``; 128+N for signal N) and one line to
  ``reply`` (opened read-write, so it never blocks even if the agent is gone). The agent, woken by that line,
  reads at most ``OUTPUT_READ_BYTES`` of each output file and removes the directory.
- The command's environment is the executing container's own: nothing of the agent's reaches it.
"""

from __future__ import annotations

EXEC_DIR = "/agentrun/exec"
TARGET_TOOLS = "tools"
TARGET_SANDBOX = "sandbox"
REQUESTS = "requests"
OUTPUT_READ_BYTES = 1024 * 1024  # of each of stdout and stderr, read back by the agent
KILL_GRACE_SECONDS = 2

# The executor. $1 is the target's directory; the rest is the container's original command (may be empty).
SCRIPT = r'''
d=$1; shift
umask 007
mkdir -p "$d" || exit 1
q="$d/requests"
if [ ! -p "$q" ]; then rm -f "$q"; mkfifo -m 660 "$q" || { echo "agentrun-exec: cannot make $q" >&2; exit 1; }; fi
run=sh; command -v bash >/dev/null 2>&1 && run=bash
sid=; command -v setsid >/dev/null 2>&1 && sid=setsid

kids() {
  for s in /proc/[0-9]*/stat; do
    read -r l < "$s" 2>/dev/null || continue
    p=${s#/proc/}; p=${p%/stat}; l=${l##*) }
    set -f; set -- $l; set +f
    [ "$2" = "$K" ] && echo "$p"
  done
}

killtree() {
  kill -STOP "$1" 2>/dev/null
  K=$1
  for c in $(kids); do killtree "$c" "$2"; done
  kill -"$2" "$1" 2>/dev/null; kill -CONT "$1" 2>/dev/null
}

stop() {
  if [ -n "$sid" ]; then kill -"$2" -"$1" 2>/dev/null; else killtree "$1" "$2"; fi
}

serve1() {
  r="$d/$1"
  t=30; [ -f "$r/timeout" ] && read -r t < "$r/timeout"
  case $t in ''|*[!0-9]*) t=30;; esac
  w=/; [ -f "$r/cwd" ] && read -r w < "$r/cwd"
  i=/dev/null; [ -f "$r/stdin" ] && i="$r/stdin"
  ( cd "$w" 2>/dev/null || cd /; exec $sid $run "$r/script" <"$i" >"$r/out" 2>"$r/err" ) &
  p=$!
  (
    trap 'kill "$s" 2>/dev/null; exit 0' TERM
    sleep "$t" & s=$!; wait "$s" || exit 0
    : > "$r/timedout"; stop "$p" TERM
    sleep 2 & s=$!; wait "$s" || exit 0
    stop "$p" KILL
  ) &
  k=$!
  wait "$p"; c=$?
  kill "$k" 2>/dev/null
  echo "$c" > "$r/exit"
  [ -p "$r/reply" ] && echo "$c" 1<>"$r/reply"
  echo "agentrun-exec[$(basename "$d")]: $1 exit $c" >&2
}

serve() {
  exec 3<>"$q"
  while read -r id <&3; do
    case $id in ''|*[!A-Za-z0-9_-]*) continue;; esac
    [ -d "$d/$id" ] && [ ! -e "$d/$id/exit" ] && serve1 "$id" &
  done
}

echo "agentrun-exec[$(basename "$d")]: serving $q" >&2
if [ "$#" -gt 0 ]; then
  serve & s=$!
  "$@" & c=$!
  trap 'kill -TERM "$c" 2>/dev/null' TERM
  trap 'kill -INT "$c" 2>/dev/null' INT
  while :; do
    wait "$c"; r=$?
    kill -0 "$c" 2>/dev/null || break
  done
  kill "$s" 2>/dev/null
  exit "$r"
fi
trap 'exit 0' TERM INT
serve
'''


def target_dir(target: str, exec_dir: str = EXEC_DIR) -> str:
    return f"{exec_dir.rstrip('/')}/{target}"


def wrap(target: str, argv: list[str], *, exec_dir: str = EXEC_DIR, shell: str = "sh") -> list[str]:
    """The container command that runs the executor for `target` (and then `argv`, the container's own command,
    if any). Only a POSIX shell is needed in the container."""
    if not target or not all(c.isalnum() or c in "-_." for c in target):
        raise ValueError(f"target {target!r} must be a DNS-label-like name")
    return [shell, "-c", SCRIPT, "agentrun-exec", target_dir(target, exec_dir), *argv]
