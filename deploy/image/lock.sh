#!/usr/bin/env bash
# Regenerates the image lock files from pyproject.toml: exact versions with hashes, for CPython 3.11 on Linux.
#   deploy/image/requirements.lock        the control plane's runtime dependencies ([project] dependencies;
#                                         the embedded stack's binaries live in the `local` extra, not here)
#   deploy/image/build-requirements.lock  the build backend that installs the project itself (setuptools, wheel)
#   deploy/image/agent-requirements.lock  the reference agent: the `agent` extra of pyproject.toml (pydantic-ai's
#                                         model layer with the OpenAI, Anthropic and MCP clients)
# Needs `uv` (pip install uv). Commit the results; the image builds install from them with --require-hashes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
UV="${UV:-uv}"
common=(--generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 --no-header --quiet)
"$UV" pip compile "${common[@]}" pyproject.toml -o deploy/image/requirements.lock
printf 'setuptools>=68\nwheel\n' | "$UV" pip compile "${common[@]}" - -o deploy/image/build-requirements.lock
python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["agent"]))' \
  | "$UV" pip compile "${common[@]}" - -o deploy/image/agent-requirements.lock
