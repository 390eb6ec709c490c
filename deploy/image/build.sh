#!/usr/bin/env bash
# Builds the two images from this checkout with whichever of docker or buildah works here:
#   agentrun:<version>        the control plane (deploy/image/Containerfile)
#   agentrun-agent:<version>  the reference agent (deploy/image/agent.Containerfile)
#
#   bash deploy/image/build.sh [--tag TAG] [--local-base] [--builder docker|buildah]
#
# The base is the public python:3.11-slim-bookworm. Where it cannot be pulled (no registry access), an
# equivalent base is made from Debian's packages (mmdebstrap: bookworm's python3 3.11, python3-venv,
# ca-certificates; from the mirror the host's apt uses) and kept as localhost/agentrun-base:bookworm, so later
# builds reuse it; --local-base (or AGENTRUN_LOCAL_BASE=1) skips the pull attempt. The host's CA bundle goes
# into the build as a secret (pip behind a TLS-intercepting proxy), PIP_INDEX_URL passes through when set.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

TAG="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n1)"
PUBLIC_BASE="docker.io/library/python:3.11-slim-bookworm"
LOCAL_BASE="localhost/agentrun-base:bookworm"
local_base="${AGENTRUN_LOCAL_BASE:-0}"
builder="${AGENTRUN_BUILDER:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG="$2"; shift 2 ;;
    --local-base) local_base=1; shift ;;
    --builder) builder="$2"; shift 2 ;;
    *) echo "usage: build.sh [--tag TAG] [--local-base] [--builder docker|buildah]" >&2; exit 2 ;;
  esac
done

if [ -z "$builder" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then builder=docker
  elif command -v buildah >/dev/null 2>&1; then builder=buildah
  else echo "build.sh: neither a working docker nor buildah (apt-get install buildah mmdebstrap crun)" >&2; exit 1
  fi
fi

have_image() {
  if [ "$builder" = docker ]; then docker image inspect "$1" >/dev/null 2>&1
  else buildah inspect --type image "$1" >/dev/null 2>&1; fi
}

pull() {
  if [ "$builder" = docker ]; then timeout 120 docker pull -q "$1" >/dev/null 2>&1
  else timeout 120 buildah pull -q "$1" >/dev/null 2>&1; fi
}

# The mirror the host's apt uses (deb822 sources or the classic list), so the base builds wherever apt works.
debian_mirror() {
  local uri
  uri="$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n1)"
  [ -n "$uri" ] || uri="$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
    | awk '{print $2}' | grep -v security | head -n1)"
  echo "${uri:-http://deb.debian.org/debian}"
}

make_local_base() {
  command -v mmdebstrap >/dev/null 2>&1 || { echo "build.sh: mmdebstrap is needed for the local base" >&2; exit 1; }
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  echo ">> building $LOCAL_BASE from Debian packages ($(debian_mirror))"
  # Documentation, manuals and translations are left out, as the slim images leave them out.
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
    --format=tar bookworm "$work/rootfs.tar" "deb $(debian_mirror) bookworm main"
  if [ "$builder" = docker ]; then
    docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["python3"]' "$work/rootfs.tar" "$LOCAL_BASE" >/dev/null
  else
    local ctr; ctr="$(buildah from scratch)"
    buildah add --quiet "$ctr" "$work/rootfs.tar" / >/dev/null
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd python3 "$ctr"
    buildah commit --quiet --rm "$ctr" "$LOCAL_BASE" >/dev/null
  fi
}

base="$PUBLIC_BASE"
if [ "$local_base" = 1 ] || { ! have_image "$PUBLIC_BASE" && ! pull "$PUBLIC_BASE"; }; then
  base="$LOCAL_BASE"
  have_image "$LOCAL_BASE" || make_local_base
fi
echo ">> base image: $base (builder: $builder)"

args=(--build-arg "BASE_IMAGE=$base")
[ -n "${PIP_INDEX_URL:-}" ] && args+=(--build-arg "PIP_INDEX=$PIP_INDEX_URL")
CA=/etc/ssl/certs/ca-certificates.crt
[ -s "$CA" ] && args+=(--secret "id=ca,src=$CA")

build() {  # file image
  echo ">> $2"
  if [ "$builder" = docker ]; then
    DOCKER_BUILDKIT=1 docker build -q "${args[@]}" -f "$1" -t "$2" . >/dev/null
  else
    buildah bud --quiet --isolation chroot --layers "${args[@]}" -f "$1" -t "$2" . >/dev/null
  fi
}
build deploy/image/Containerfile "agentrun:$TAG"
build deploy/image/agent.Containerfile "agentrun-agent:$TAG"
echo "built agentrun:$TAG and agentrun-agent:$TAG"
