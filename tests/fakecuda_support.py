"""Running the cuda backend through the real harness on the fake CUDA runtime (``tests/fakecuda``): the
fake CuPy and the fake ``ib_write_bw`` are put on the probe child's paths, and what they were asked to do
is read back from their logs."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

import probes
import topology as t
from probes.core._profiles import KiB
from tests.probe_snapshots import this_host
from topology import replace

FAKE = Path(__file__).parent / "fakecuda"

# Small enough that a test is quick, large enough that every chunk size and offset path is taken.
TINY = dataclasses.replace(
    probes.SELFTEST, name="tiny", copy_bytes=256 * KiB, copy_warmup=1, copy_iters=2, samples=2,
    latency_accesses=2000, latency_warmup=100, collective_sizes=(64 * KiB, 256 * KiB), collective_iters=3,
    collective_graph_launches=2, collective_samples=2,
    rdma_iters=100,
)


def bus(i: int) -> str:
    return f"0000:{0x10 + i:02x}:00.0"


@dataclasses.dataclass
class Fake:
    log: Path
    perftest_log: Path

    def calls(self, name: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        lines = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [c for c in lines if name is None or c["call"] == name]

    def perftest(self) -> list[dict[str, Any]]:
        if not self.perftest_log.exists():
            return []
        return [json.loads(line) for line in self.perftest_log.read_text().splitlines()]


def configure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, gpus: int = 2, **env: str) -> Fake:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(FAKE), os.environ.get("PYTHONPATH", "")) if p))
    monkeypatch.setenv("PATH", f"{FAKE / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    tmp_path.mkdir(parents=True, exist_ok=True)
    fake = Fake(tmp_path / "fakecuda.log", tmp_path / "perftest.log")
    monkeypatch.setenv("FAKECUDA_GPUS", str(gpus))
    monkeypatch.setenv("FAKECUDA_LOG", str(fake.log))
    monkeypatch.setenv("FAKE_PERFTEST_LOG", str(fake.perftest_log))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return fake


def gpu_box(gpus: int) -> t.Snapshot:
    """This machine's NUMA node 0 (real CPUs, for the host buffers) and ``gpus`` fake GPUs on it."""
    host = this_host()
    devices = tuple(t.Gpu(id=bus(i), index=i, numa_node=0, memory_bytes=80 << 30) for i in range(gpus))
    return replace(host, gpus=devices)


def outcomes(report: probes.ProbeReport, test: str) -> list[probes.ProbeOutcome]:
    return [o for o in report.outcomes if o.test == test]
