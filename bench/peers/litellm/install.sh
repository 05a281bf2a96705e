#!/usr/bin/env bash
# Installs the LiteLLM proxy peer from PyPI into .peers/litellm-venv (git-ignored). Needs python3 (3.9+).
#
#   bench/peers/litellm/install.sh [VERSION]      default 1.106.2, the version measured
set -euo pipefail
VERSION=${1:-1.106.2}
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
VENV="$ROOT/.peers/litellm-venv"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "litellm[proxy]==$VERSION"
"$VENV/bin/pip" freeze | grep -iE '^(litellm|litellm-proxy-extras|litellm-enterprise|fastapi|uvicorn|uvloop|httpx|aiohttp|openai|orjson|pydantic|starlette)==' > "$ROOT/.peers/litellm-VERSIONS.txt"
"$VENV/bin/python" --version >> "$ROOT/.peers/litellm-VERSIONS.txt"
cat "$ROOT/.peers/litellm-VERSIONS.txt"
