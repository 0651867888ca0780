"""The cuda backend end to end through the real harness, in child processes, on the fake CUDA runtime:
one process per pass, peer access under CUDA's limit of 8 peers, every copy checked after every sample,
collectives timed as CUDA graphs behind the latch, the anchors' tests, and numbers labelled simulated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import probes
import topology as t
from probes import Status
from tests.fakecuda_support import FAKE, TINY, configure, gpu_box, outcomes

pytestmark = pytest.mark.slow


def test_a_pass_is_one_child_that_starts_cuda_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = configure(monkeypatch, tmp_path)
    snap = gpu_box(2)
    tests = ["host_to_device_memcpy_ce", "device_to_device_memcpy_write_ce", "host_device_latency_sm", "all_reduce"]
    with probes.ProbeProcess("cuda") as process:
        report = probes.run_probes(snap, profile_name=TINY, tests=tests, process=process)
        assert process.children_started == 1
    assert {o.status for o in report.outcomes} == {Status.OK}, [o.reason for o in report.outcomes]
    assert len(fake.calls("process")) == 1  # capabilities and every item: one process, one CUDA start
    assert "cupy" not in sys.modules  # the parent never loads CUDA
    assert {m.source for m in report.measurements} == {t.Source.SIMULATED}
    assert "SIMULATED numbers, not measured on hardware" in probes.render_report(report, snap)
    assert not fake.calls("latch_timeout")  # the host released every latch before anything waited on it


def test_the_fake_refuses_a_ninth_peer(tmp_path: Path) -> None:
    code = ("import cupy\nrt = cupy.cuda.runtime\nwith cupy.cuda.Device(0):\n"
            "    for p in range(1, 10):\n"
            "        try:\n            rt.deviceEnablePeerAccess(p)\n"
            "        except rt.CUDARuntimeError as e:\n            print(p, e.status)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(FAKE), "FAKECUDA_GPUS": "10"})
    assert done.stdout.split() == ["9", "711"]  # cudaErrorTooManyPeers
    fabric = {"PYTHONPATH": str(FAKE), "FAKECUDA_GPUS": "10", "FAKECUDA_NVSWITCH": "all"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=fabric)
    assert done.stdout.split() == []  # one NVSwitch fabric: CUDA imposes no limit
    part = {**fabric, "FAKECUDA_NVSWITCH": "0,1,2,3,4,5,6,7,8"}  # GPU 9 is reached over PCIe
    done = subprocess.run([sys.executable, "-c", code.replace("range(1, 10)", "range(9, 0, -1)")],
                          capture_output=True, text=True, check=True, env=part)
    assert done.stdout.split() == []  # the PCIe peer is the only one that counts


def test_peer_access_is_given_back_after_each_pair(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = configure(monkeypatch, tmp_path, gpus=10)
    report = probes.run_probes(gpu_box(10), profile_name=TINY, backend="cuda",
                               tests=["device_to_device_memcpy_write_ce", "device_to_device_latency_sm"])
    assert len(report.outcomes) == 2 * 90
    assert {o.status for o in report.outcomes} == {Status.OK}, {o.reason for o in report.outcomes}
    enabled, disabled = fake.calls("peer_enable"), fake.calls("peer_disable")
    assert not fake.calls("peer_refused")
    assert max(c["mapped"] for c in enabled) == 1  # one peer mapped at a time, never near CUDA's 8
    assert sorted((c["device"], c["peer"]) for c in enabled) == sorted((c["device"], c["peer"]) for c in disabled)
    assert len(enabled) == 90 * 2 + 90  # copies: both ways per pair; latency: the chaser to the memory
    write = outcomes(report, "device_to_device_memcpy_write_ce")[0]
    assert dict(write.measurements[0].conditions)["peer_access"] == "enabled both ways for this item, disabled after it"


@pytest.mark.parametrize("test", ["host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_local_copy",
                                  "device_to_device_memcpy_read_sm", "host_to_all_memcpy_ce"])
def test_every_sample_of_a_copy_is_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, test: str) -> None:
    configure(monkeypatch, tmp_path, FAKECUDA_CORRUPT="1")
    report = probes.run_probes(gpu_box(2), profile_name=TINY, backend="cuda", tests=[test])
    failed = outcomes(report, test)[0]
    assert failed.status is Status.FAILED
    assert failed.reason.startswith(f"data check failed at {TINY.copy_bytes} bytes: sample 1: timed copy")
    assert "differ" in failed.reason and not failed.measurements


def test_collectives_are_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    configure(monkeypatch, tmp_path, gpus=3, FAKECUDA_CORRUPT="1")
    report = probes.run_probes(gpu_box(3), profile_name=TINY, backend="cuda", tests=["all_gather"])
    (failed,) = report.outcomes
    assert failed.status is Status.FAILED and "wrong elements over all ranks (out of place)" in failed.reason


def test_collectives_are_timed_as_graphs_on_the_host_clock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = configure(monkeypatch, tmp_path, gpus=3)
    ops = ["all_reduce", "all_gather", "reduce_scatter", "alltoall"]
    report = probes.run_probes(gpu_box(3), profile_name=TINY, backend="cuda", tests=ops)
    assert {o.status for o in report.outcomes} == {Status.OK}, [o.reason for o in report.outcomes]
    cells = len(ops) * 2 * len(TINY.collective_sizes)  # every collective out of place and in place
    assert len(fake.calls("capture_begin")) == 3 * cells  # one graph per GPU, size and mode
    launches = TINY.collective_graph_launches
    assert len(fake.calls("graph_launch")) == 3 * cells * TINY.samples * launches
    assert all(c["ops"] == TINY.collective_iters for c in fake.calls("capture_end"))
    assert not [c for c in fake.calls("kernel") if c["name"] == "topolink_latch"]  # nccl-tests holds no latch
    for o in report.outcomes:
        best, alg, avg = o.measurements
        assert (best.direction, alg.direction, avg.direction) == ("busbw", "algbw", "avg_busbw")
        assert {dict(m.conditions)["mode"] for m in o.sweep} == {"out of place", "in place"}
        assert len(o.sweep) == 2 * 2 * len(TINY.collective_sizes)
        # nccl-tests' Avg bus bandwidth: the mean of every busbw cell, in place and out of place
        bus = [m.value for m in o.sweep if m.direction == "busbw"]
        assert len(bus) == 2 * len(TINY.collective_sizes) and avg.value == pytest.approx(sum(bus) / len(bus))
        conditions = dict(best.conditions)
        assert conditions["timing_mode"] == "graph"
        assert f"divided by iterations x launches (nccl-tests -G {launches})" in conditions["timing"]
    reduce = outcomes(report, "all_reduce")[0]
    assert reduce.measurements[0].value == pytest.approx(reduce.measurements[1].value * 2 * 2 / 3)


@pytest.mark.parametrize("capture", [True, False])
def test_the_wall_clock_counts_the_launches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capture: bool) -> None:
    """Each launch costs the fake host 1 ms: a window on the host's wall clock holds them, one between CUDA
    events behind a latch would not (the fake's GPU moves 64 KiB in microseconds)."""
    env = {"FAKECUDA_LAUNCH_US": "1000"} | ({} if capture else {"FAKECUDA_NO_CAPTURE": "1"})
    configure(monkeypatch, tmp_path, gpus=3, **env)
    report = probes.run_probes(gpu_box(3), profile_name=TINY, backend="cuda", tests=["all_reduce"])
    (o,) = report.outcomes
    assert o.status is Status.OK, o.reason
    # graph: 3 GPUs x launches graph launches per window of iters x launches operations; stream: 3 calls
    # per operation. Either way at least 1 ms of launches per operation.
    per_op = 3e-3 / TINY.collective_iters if capture else 3e-3
    for m in o.sweep:
        if m.direction == "algbw":
            assert m.value <= (m.size_bytes or 0) / per_op * 1.0001, (m.size_bytes, m.value)
    conditions = dict(o.measurements[0].conditions)
    assert conditions["timing_mode"] == ("graph" if capture else "stream")
    if not capture:
        assert "around the operations issued one by one; divided by iterations (nccl-tests without -G" in (
            conditions["timing"])


@pytest.mark.parametrize(("version", "calls"), [("22803", {"allToAll"}), ("22703", {"send", "recv"})])
def test_alltoall_takes_nccl_tests_path_for_the_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        version: str, calls: set[str]) -> None:
    fake = configure(monkeypatch, tmp_path, gpus=3, FAKECUDA_NCCL_VERSION=version)
    report = probes.run_probes(gpu_box(3), profile_name=TINY, backend="cuda", tests=["alltoall"])
    (o,) = report.outcomes
    assert o.status is Status.OK, o.reason
    assert {k for c in fake.calls("nccl_group") for k in c["calls"]} == calls
    said = dict(o.measurements[0].conditions)["alltoall"]
    assert said.startswith("ncclAlltoAll" if version == "22803" else "one ncclSend and ncclRecv per peer")


def test_a_misplaced_all_reduce_fails_its_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every element summed right but put one place further: constant values would not see it."""
    configure(monkeypatch, tmp_path, gpus=3, FAKECUDA_NCCL_FAULT="rotate")
    report = probes.run_probes(gpu_box(3), profile_name=TINY, backend="cuda", tests=["all_reduce"])
    (o,) = report.outcomes
    assert o.status is Status.FAILED and "wrong elements over all ranks (out of place)" in o.reason


def test_without_nvrtc_the_kernel_tests_are_waived(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    configure(monkeypatch, tmp_path, FAKECUDA_NO_NVRTC="1")
    tests = ["host_to_device_memcpy_ce", "host_to_device_memcpy_sm", "host_device_latency_sm"]
    report = probes.run_probes(gpu_box(1), profile_name=TINY, backend="cuda", tests=tests)
    ce, = outcomes(report, "host_to_device_memcpy_ce")
    assert ce.status is Status.OK
    assert dict(ce.measurements[0].conditions)["latch"].startswith("none: NVRTC could not compile")
    for test in tests[1:]:
        (o,) = outcomes(report, test)
        assert o.status is Status.WAIVED and o.reason.startswith("NVRTC could not compile the probe kernels")


def test_the_anchors_copy_tests_run_with_their_conditions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    configure(monkeypatch, tmp_path, gpus=3)
    tests = ["host_to_device_bidirectional_memcpy_ce", "all_to_host_bidirectional_memcpy_ce",
             "device_to_device_bidirectional_memcpy_write_sm", "host_to_all_memcpy_sm"]
    report = probes.run_probes(gpu_box(3), profile_name=TINY, backend="cuda", tests=tests)
    assert {o.status for o in report.outcomes} == {Status.OK}, [o.reason for o in report.outcomes]
    both = outcomes(report, "all_to_host_bidirectional_memcpy_ce")[0]
    (m,) = both.measurements
    cond = dict(m.conditions)
    assert m.direction == "b->a" and cond["interference"].startswith("5 untimed copies of twice the size")
    assert "cudaHostRegister" in cond["host_buffer"] and "cuMemHostAlloc" in cond["host_buffer"]
    sm = outcomes(report, "device_to_device_bidirectional_memcpy_write_sm")[0]
    assert [x.direction for x in sm.measurements] == ["a->b", "b->a", "a<->b"]
    assert dict(sm.measurements[0].conditions)["engine"].startswith("SM kernel")
