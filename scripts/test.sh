#!/usr/bin/env bash
# The whole test suite, from a fresh machine: environment, lint, types, import contracts, tests with coverage.
# Usage: ./scripts/test.sh [pytest args...]      (TOPOLINK_FRESH_VENV=1 rebuilds .venv from scratch)
set -euo pipefail
cd "$(dirname "$0")/.."

# System tools the tests run for real: lstopo (hwloc) to compare discovery with on this machine,
# promtool/prometheus for the exporter, gcc for the test NVML library. The apiserver tier runs when
# $KUBEBUILDER_ASSETS names a folder with envtest's etcd and kube-apiserver (CONTRIBUTING.md: Tests).
need=()
command -v lstopo-no-graphics >/dev/null 2>&1 || command -v lstopo >/dev/null 2>&1 || need+=(hwloc)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v dot >/dev/null 2>&1 || need+=(graphviz)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The apiserver tier (envtest's etcd and kube-apiserver in $KUBEBUILDER_ASSETS, else in envtest's default
# /usr/local/kubebuilder/bin) makes its certificates.
if [ -x "${KUBEBUILDER_ASSETS:-/usr/local/kubebuilder/bin}/kube-apiserver" ]; then
    command -v openssl >/dev/null 2>&1 || need+=(openssl)
fi
if ((${#need[@]})); then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    else
        echo "test.sh: missing system packages: ${need[*]} (install them with apt-get as root)" >&2
        exit 1
    fi
fi

if [ "${TOPOLINK_FRESH_VENV:-0}" = 1 ]; then rm -rf .venv; fi
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
fi
# torch's CPU build (gloo all-reduce): the local version "+cpu" is only on PyTorch's CPU index (or a local
# wheel), so the pin never resolves to PyPI's CUDA build and its nvidia-* packages. Tried first from the
# configured indexes, then from PyTorch's.
TORCH="torch==2.13.0+cpu"
if ! .venv/bin/pip install -q "$TORCH" 2>/dev/null; then
    .venv/bin/pip install -q "$TORCH" --extra-index-url https://download.pytorch.org/whl/cpu
fi
.venv/bin/pip install -q -e ".[dev]"
# Helm 4's library for tests/test_chart.py (about 120 MB). It declares Python >= 3.12 and runs on 3.11, which
# no marker of the dev extra can say: installed here, past its declared range; without it the tests skip.
.venv/bin/pip install -q --ignore-requires-python helm-sdkpy==0.1.32 || echo "test.sh: helm-sdkpy not installed: the Helm chart tests will skip" >&2

PKGS=(topology agent probes exporter)
echo "== ruff"
.venv/bin/ruff check "${PKGS[@]}" tests benchmarks
echo "== mypy --strict"
.venv/bin/mypy
echo "== import contracts"
.venv/bin/lint-imports
echo "== pytest"
set +e
# One worker per core (TOPOLINK_TEST_WORKERS=0: none); a file's tests stay together on one worker, in order,
# as their module-scoped servers and fixtures expect; each worker starts its own session-scoped servers.
.venv/bin/python -m pytest -n "${TOPOLINK_TEST_WORKERS:-auto}" --dist loadfile --cov --cov-report=term "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then
    echo "test.sh: pytest collected no tests: that is a failure" >&2
    exit 1
fi
exit "$rc"
