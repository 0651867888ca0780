#!/usr/bin/env bash
# Set up topolink in .venv (first run only) and discover this node's topology.
# Usage: ./scripts/discover.sh [topolink discover args...], e.g. --format json -o node.json
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/topolink ]; then
    python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -e .
fi
exec .venv/bin/topolink discover "$@"
