"""What ``serve`` keeps loaded, which is most of its resident size (issue 52: beside node_exporter): on a node
with no Kubernetes sink and probes off it loads no web framework, no Kubernetes client or label and slice
builders, no probe harness, and not the idna codec. Not timed and not a size in bytes (benchmarks/serve.py
measures the resident size): the modules a size rests on, after a real serve has answered /metrics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakenvml import materialize
from tests.test_serve import REPO, free_port, get, wait_for

# Runs serve, then prints the modules it held when it stopped (SIGTERM: main returns 0).
_RUN = """
import json, sys
from agent.cli.serve import main
code = main(sys.argv[1:])
print(json.dumps(sorted(sys.modules)), file=sys.__stderr__)
sys.exit(code)
"""

NEVER = (
    "starlette", "anyio", "fastapi", "pydantic", "lightkube", "httpx2", "httpx", "cupy", "torch", "numpy",
    "exporter.kube._desired._labels", "exporter.kube._desired._slices", "exporter.kube._sinks",
    "exporter.kube._client", "exporter.kube._config._rbac", "exporter.kube._fleet",
    "probes.harness", "probes.core._stats",
    "encodings.idna",
    # the page and placement: loaded by the first GET / or /v1/placement, not by a scrape or a picture
    "exporter._webpage._page", "exporter._placement", "topology.placement",
    "importlib.metadata",  # the version is agent.__version__
)


@pytest.mark.slow
def test_serve_without_sinks_or_probes_loads_only_what_it_serves(tmp_path: Path) -> None:
    node = materialize("hgx-h100", tmp_path / "machine")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | node.env()
    proc = subprocess.Popen([sys.executable, "-c", _RUN, "--host", "127.0.0.1", "--port", str(port),
                             "--state-dir", str(tmp_path / "state")], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for("readyz", lambda: get(f"http://127.0.0.1:{port}/readyz", timeout=2)[0] == 200)
        status, body = get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200 and b"topolink_gpu_info{" in body
        assert get(f"http://127.0.0.1:{port}/v1/topology.dot")[0] == 200  # a route in the thread pool too
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-3000:]
    loaded = set(json.loads(err.strip().splitlines()[-1]))
    assert {"uvicorn", "h11", "prometheus_client", "probes.core._catalogue"} <= loaded  # what it does serve with
    held = sorted(m for m in loaded if any(m == n or m.startswith(f"{n}.") for n in NEVER))
    assert held == [], held
