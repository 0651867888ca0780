"""The agent's probe pass: one child process for the whole pass (CUDA started once), NVML asked before
every item, and that child's own CUDA context never taken for a job that makes a GPU busy."""

from __future__ import annotations

import sys
import threading
import types
from pathlib import Path

import pytest

from agent.serve._probe import BUSY, BUSY_UNKNOWN, Item, run_pass
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


@pytest.mark.slow
@pytest.mark.parametrize("timing", ["stream", "graph"])
def test_the_agents_setting_chooses_the_nccl_tests_mode(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        timing: str) -> None:
    fake = configure(monkeypatch, tmp_path)
    report = run_pass(gpu_box(2), profile="selftest", backend="cuda", tests=["all_reduce"], busy=dict,
                      stop=threading.Event(), collective_timing=timing)
    (o,) = report.outcomes
    assert o.status is Status.OK, o.reason
    assert {dict(m.conditions)["timing_mode"] for m in o.sweep} == {timing}
    assert dict(o.measurements[0].conditions)["nccl_tests"].endswith("-G 0" if timing == "stream" else "-G 1")
    assert bool(fake.calls("capture_begin")) == (timing == "graph")


@pytest.mark.slow
def test_a_gpu_whose_busy_state_is_unknown_is_not_probed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    configure(monkeypatch, tmp_path)
    box = gpu_box(2)
    index = {g.id: g.index for g in box.gpus}[bus(1)]
    seen: list[Item] = []
    report = run_pass(box, profile="selftest", backend="cuda", tests=["device_local_copy"],
                      busy=lambda: {bus(0): "", f"nvml index {index}": "busy state unknown: x failed (y)"},
                      stop=threading.Event(), on_item=seen.append)
    by = {o.subjects[-1]: o for o in report.outcomes}
    assert by[bus(0)].status is Status.OK and by[bus(1)].status is Status.WAIVED
    assert [i.status for i in seen] == ["ok", BUSY_UNKNOWN] or [i.status for i in seen] == [BUSY_UNKNOWN, "ok"]

def nvml(processes: dict[str, list[int]]) -> types.ModuleType:
    """A stand-in for pynvml: the GPUs by bus id, each with the PIDs of its compute processes."""

    class NVMLError(Exception):
        pass

    buses = list(processes)
    module = types.ModuleType("pynvml")
    module.NVMLError = NVMLError  # type: ignore[attr-defined]
    module.nvmlInit = lambda: None  # type: ignore[attr-defined]
    module.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    module.nvmlDeviceGetCount = lambda: len(buses)  # type: ignore[attr-defined]
    module.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    module.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=buses[h].encode())  # type: ignore[attr-defined]
    module.nvmlDeviceGetComputeRunningProcesses = (  # type: ignore[attr-defined]
        lambda h: [types.SimpleNamespace(pid=p) for p in processes[buses[h]]])
    module.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=0, memory=0)  # type: ignore[attr-defined]
    return module


def test_our_own_probe_process_does_not_make_a_gpu_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    child, a, b = 4242, "0000:10:00.0", "0000:11:00.0"
    monkeypatch.setitem(sys.modules, "pynvml", nvml({a: [child], b: []}))
    assert read_busy() == {a: "1 compute process running", b: ""}
    ours(child)
    try:
        assert read_busy() == {a: "", b: ""}  # seen by its PID (no PID namespace between us and NVML)
    finally:
        ours(child, alive=False)
    assert read_busy()[a] == "1 compute process running"


def test_in_a_container_one_unknown_process_is_taken_for_our_child(monkeypatch: pytest.MonkeyPatch) -> None:
    # NVML lists host PIDs; inside the pod the child is PID 57, on the host 91234
    child, a, b = 57, "0000:10:00.0", "0000:11:00.0"
    monkeypatch.setitem(sys.modules, "pynvml", nvml({a: [91234], b: [91234, 777]}))
    ours(child, gpus=[a])
    try:
        assert read_busy() == {a: "", b: "2 compute processes running"}  # it never touched GPU b
        ours(child, gpus=[b])
        assert read_busy() == {a: "", b: "1 compute process running"}  # a job beside our child is still one
    finally:
        ours(child, alive=False)
