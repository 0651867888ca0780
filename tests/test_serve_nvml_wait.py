"""`topolink serve` on a node whose driver is still loading: the test NVML refuses the first inits
(DRIVER_NOT_LOADED), then answers. Meanwhile the agent is not ready and says why, publishes nothing
NVLink-derived, and tries again sooner than its interval; once NVML answers it takes the whole machine
without a restart."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.serve._retry import retry_delay
from tests.fakenvml import materialize
from tests.test_serve import REPO, Served, free_port, get, wait_for

pytestmark = pytest.mark.slow


def test_retry_delays_double_up_to_the_interval() -> None:
    assert [retry_delay(n, 60.0) for n in range(9)] == [60.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert retry_delay(3, 2.5) == 2.5


def test_serve_waits_for_nvml_and_then_takes_the_machine(tmp_path: Path) -> None:
    node = materialize("hgx-h100", tmp_path / "machine", {"inject": [
        {"call": "nvmlInitWithFlags", "error": "DRIVER_NOT_LOADED", "first": 3}]})
    features = tmp_path / "features"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | node.env()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "agent.cli.serve", "--host", "127.0.0.1", "--port", str(port),
                                 "--state-dir", str(tmp_path / "state"), "--probe-interval", "0",
                                 "--discovery-interval", "600", "--node-name", "hgx", "--labels-via", "file",
                                 "--features-file", str(features)], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    served = Served(proc, f"http://127.0.0.1:{port}", node, tmp_path / "state", log)
    try:
        wait_for("the first pass", lambda: get(served.url + "/readyz", timeout=2)[0] == 503 and
                 b"NVML does not answer" in get(served.url + "/readyz", timeout=2)[1])
        status, body = get(served.url + "/readyz")
        assert status == 503 and b"NVML_ERROR_DRIVER_NOT_LOADED" in body, body
        metrics = served.metrics()
        assert 'topolink_nvml_unavailable_info{error="NVML_ERROR_DRIVER_NOT_LOADED"} 1.0' in metrics
        for family in ("topolink_gpu_pair_nvlinks{", "topolink_gpu_nvlinks{", "topolink_nvlink_island_gpus{",
                       "topolink_gpu_nvlink_island{"):
            assert family not in metrics, family  # unknown: no sample, never 0 (which would read as PCIe only)
        assert 'kind="nvlink-down"' not in metrics
        waiting = features.read_text() if features.exists() else ""
        assert "interconnect" not in waiting and "nvlink" not in waiting  # nothing guessed, e.g. pcie
        t0 = time.monotonic()
        wait_for("NVML to answer", lambda: get(served.url + "/readyz", timeout=2)[0] == 200, timeout=30)
        assert time.monotonic() - t0 < 20  # tries at 1, 2 and 4 s, not after the 600 s interval
        metrics = served.metrics()
        assert "topolink_nvml_unavailable_info{" not in metrics
        pairs = [line for line in metrics.splitlines() if line.startswith("topolink_gpu_pair_nvlinks{")]
        assert len(pairs) == 28 and all(line.endswith(" 18.0") for line in pairs), pairs
        down = [line for line in metrics.splitlines() if line.startswith('topolink_degraded{kind="nvlink-down"')]
        assert len(down) == 8 and all(line.endswith(" 0.0") for line in down), down
        wait_for("the labels", lambda: "interconnect=nvswitch" in features.read_text())
        assert "nvlink-domain-size=8" in features.read_text()
        assert "waiting for NVML" in log.read_text() and "NVML answered" in log.read_text()
    finally:
        assert served.stop() == 0, log.read_text()
