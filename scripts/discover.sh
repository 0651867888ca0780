#!/usr/bin/env bash
# Set up topolink in .venv (first run only) and discover this node's topology.
# Usage: ./scripts/discover.sh [topolink discover args...], e.g. --format json -o node.json
# Relative paths (-o node.json, --from, --sysfs-root) are the caller's: only the set-up runs in the repository.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$repo/.venv/bin/topolink" ]; then
    echo "Setting up .venv (first run only)..." >&2
    log=$(mktemp)
    if ! (cd "$repo" && python3 -m venv .venv && .venv/bin/pip install -q --upgrade pip && .venv/bin/pip install -q -e .) >"$log" 2>&1; then
        cat "$log" >&2
        echo "discover.sh: setting up .venv failed (log above)" >&2
        exit 1
    fi
    rm -f "$log"
fi
exec "$repo/.venv/bin/topolink" discover "$@"
