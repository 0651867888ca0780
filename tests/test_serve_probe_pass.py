"""The agent's probe pass: one child process for the whole pass (CUDA started once), NVML asked before
every item, and that child's own CUDA context never taken for a job that makes a GPU busy."""

from __future__ import annotations

import sys
import threading
import types
from pathlib import Path

import pytest

from agent.serve._probe import BUSY, Item, run_pass
from probes import Status
from probes.core import ours, read_busy
from tests.fakecuda_support import bus, configure, gpu_box


@pytest.mark.slow
def test_a_pass_keeps_one_child_and_skips_a_busy_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = configure(monkeypatch, tmp_path)
    asked: list[int] = []

    def busy() -> dict[str, str]:
        asked.append(1)
        return {bus(1): "1 compute process running"}

    seen: list[Item] = []
    report = run_pass(gpu_box(2), profile="selftest", backend="cuda",
                      tests=["device_local_copy", "host_to_device_memcpy_ce"], busy=busy, stop=threading.Event(),
                      on_item=seen.append)
    by = {(o.test, o.subjects[-1]): o for o in report.outcomes}
    assert by["device_local_copy", bus(0)].status is Status.OK
    assert by["device_local_copy", bus(1)].status is Status.WAIVED
    assert "GPU 0000:11:00.0 is busy (1 compute process running)" in by["device_local_copy", bus(1)].reason
    assert [i.status for i in seen].count(BUSY) == 2 and len(asked) == 4  # asked before every item
    assert len(fake.calls("process")) == 1  # capabilities and both items ran in one CUDA process


def test_our_own_probe_process_does_not_make_a_gpu_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    child = 4242

    class NVMLError(Exception):
        pass

    nvml = types.ModuleType("pynvml")
    nvml.NVMLError = NVMLError  # type: ignore[attr-defined]
    nvml.nvmlInit = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: 1  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=b"00000000:10:00.0")  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetComputeRunningProcesses = lambda h: [types.SimpleNamespace(pid=child)]  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=0, memory=0)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert read_busy() == {"0000:10:00.0": "1 compute process running"}
    ours(child)
    try:
        assert read_busy() == {"0000:10:00.0": ""}
    finally:
        ours(child, alive=False)
    assert read_busy() == {"0000:10:00.0": "1 compute process running"}
