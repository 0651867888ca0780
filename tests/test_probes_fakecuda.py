"""The cuda backend end to end through the real harness, in child processes, on the fake CUDA runtime:
one process per pass, peer access under CUDA's limit of 8 peers, every copy checked after every sample,
collectives timed as CUDA graphs behind the latch, the anchors' tests, and numbers labelled simulated."""

from __future__ import annotations

import dataclasses
import re
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
    # every copy of the sample is corrupted: the first leg that differs is named (host_to_all's legs hold the
    # timed copy among the interfering ones, in GPU order, so an item may name an interfering copy first)
    copies = "(timed|interfering) copy" if test == "host_to_all_memcpy_ce" else "timed copy"
    assert re.match(rf"data check failed at {TINY.copy_bytes} bytes: sample 1: {copies} ", failed.reason), failed.reason
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
    windows = TINY.collective_samples
    assert len(fake.calls("capture_begin")) == 3 * cells * windows  # one graph per GPU and window, as nccl-tests
    launches = TINY.collective_graph_launches
    assert len(fake.calls("graph_launch")) == 3 * cells * windows * launches
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
        assert conditions["timing_mode"] == "graph" and conditions["timing_asked"] == "graph"
        assert f"divided by iterations x launches (nccl-tests -G {launches})" in conditions["timing"]
        assert conditions["nccl_tests"] == (f"{o.test}_perf -b 64K -e 256K -f 4 -g 3 -n {TINY.collective_iters} "
                                            f"-w {TINY.collective_warmup} -G {launches}")
        assert all(len(m.stats.samples) == windows for m in o.sweep if m.stats)
    reduce = outcomes(report, "all_reduce")[0]
    assert reduce.measurements[0].value == pytest.approx(reduce.measurements[1].value * 2 * 2 / 3)


@pytest.mark.parametrize("how", ["graph", "refused", "stream"])
def test_the_wall_clock_counts_the_launches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str) -> None:
    """Each launch costs the fake host 1 ms: a window on the host's wall clock holds them, one between CUDA
    events behind a latch would not (the fake's GPU moves 64 KiB in microseconds). ``stream`` is the
    setting for nccl-tests -G 0: nothing is captured; ``refused``: graphs asked, every capture refused."""
    env = {"FAKECUDA_LAUNCH_US": "1000"} | ({"FAKECUDA_NO_CAPTURE": "1"} if how == "refused" else {})
    fake = configure(monkeypatch, tmp_path, gpus=3, **env)
    timing = "stream" if how == "stream" else None
    report = probes.run_probes(gpu_box(3), profile_name=TINY, backend="cuda", tests=["all_reduce"],
                               collective_timing=timing)
    (o,) = report.outcomes
    assert o.status is Status.OK, o.reason
    # graph: 3 GPUs x launches graph launches per window of iters x launches operations; stream: 3 calls
    # per operation. Either way at least 1 ms of launches per operation.
    graph = how == "graph"
    per_op = 3e-3 / TINY.collective_iters if graph else 3e-3
    for m in o.sweep:
        if m.direction == "algbw":
            assert m.value <= (m.size_bytes or 0) / per_op * 1.0001, (m.size_bytes, m.value)
        assert dict(m.conditions)["timing_mode"] == ("graph" if graph else "stream")
    conditions = dict(o.measurements[0].conditions)
    assert conditions["timing_mode"] == ("graph" if graph else "stream")
    assert conditions["timing_asked"] == ("stream" if how == "stream" else "graph")
    assert conditions["nccl_tests"].endswith(f"-G {TINY.collective_graph_launches if how != 'stream' else 0}")
    if not graph:
        assert "around the operations issued one by one from Python; divided by iterations (nccl-tests -G 0" in (
            conditions["timing"])
        assert ("graph capture refused" in conditions["timing"]) == (how == "refused")
    assert bool(fake.calls("capture_begin")) == graph


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


@pytest.mark.parametrize("graph_sizes", [1, 2])
def test_a_capture_refused_part_way_labels_each_cell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    graph_sizes: int) -> None:
    """The fake lets the captures of the first sizes begin and refuses every later one: the cells timed as
    graph launches before the refusal stay ``graph``, the later ones are ``stream``, and the peak and the
    average come from the cells of one mode (the one most cells have), saying which and what they left out."""
    sizes = (64 * 1024, 128 * 1024, 256 * 1024)
    profile = dataclasses.replace(TINY, collective_sizes=sizes)
    gpus, cells_per_size = 3, 2  # out of place and in place
    captures = gpus * cells_per_size * profile.collective_samples * graph_sizes  # per GPU, cell and window
    configure(monkeypatch, tmp_path, gpus=gpus, FAKECUDA_CAPTURES=str(captures))
    report = probes.run_probes(gpu_box(gpus), profile_name=profile, backend="cuda", tests=["all_reduce"])
    (o,) = report.outcomes
    assert o.status is Status.OK, o.reason
    for m in o.sweep:
        cond = dict(m.conditions)
        want = "graph" if sizes.index(m.size_bytes or 0) < graph_sizes else "stream"
        assert cond["timing_mode"] == want, (m.size_bytes, cond["mode"])
        assert ("capture refused" in cond["timing"]) == (want == "stream")
        assert ("(nccl-tests -G 0;" in cond["timing"]) == (want == "stream")
        assert (f"(nccl-tests -G {profile.collective_graph_launches})" in cond["timing"]) == (want == "graph")
    graph_cells = cells_per_size * graph_sizes
    stream_cells = cells_per_size * (len(sizes) - graph_sizes)
    chosen = "graph" if graph_cells > stream_cells else "stream"
    best, alg, avg = o.measurements
    kept = [m for m in o.sweep if m.direction == "busbw" and dict(m.conditions)["timing_mode"] == chosen]
    assert avg.value == pytest.approx(sum(m.value for m in kept) / len(kept))
    assert best.value == max(m.value for m in kept)
    left = min(graph_cells, stream_cells)
    for m in (best, alg, avg):
        cond = dict(m.conditions)
        assert cond["timing_mode"] == chosen
        assert f"from the {len(kept)} busbw cell(s)" in cond["summary"]
        assert f"{left} cell(s) timed otherwise left out" in cond["summary"]


@pytest.mark.parametrize(("size", "kernel"), [(TINY.copy_bytes, "topolink_copy_simple"),
                                              (64 << 20, "topolink_copy_sm")])
def test_sm_copies_take_nvbandwidths_kernel_for_their_size(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           size: int, kernel: str) -> None:
    """Below 64 MiB nvbandwidth copies with one thread per 16-byte word (blocks of up to 1024); from 64 MiB
    up with its striding kernel over a block of 512 threads per SM."""
    fake = configure(monkeypatch, tmp_path)
    profile = dataclasses.replace(TINY, copy_bytes=size)
    report = probes.run_probes(gpu_box(2), profile_name=profile, backend="cuda",
                               tests=["device_to_device_memcpy_read_sm"])
    assert {o.status for o in report.outcomes} == {Status.OK}, [o.reason for o in report.outcomes]
    copies = [c for c in fake.calls("kernel") if c["name"].startswith("topolink_copy")]
    assert copies and {c["name"] for c in copies} == {kernel}
    engine = dict(report.outcomes[0].measurements[0].conditions)["engine"]
    if kernel == "topolink_copy_simple":
        assert {(c["grid"], c["block"]) for c in copies} == {(size // 16 // 1024, 1024)}
        assert engine.startswith("SM kernel, nvbandwidth's simple copy below 64 MiB (one thread per 16-byte word")
        assert report.outcomes[0].measurements[0].value > 0
    else:
        assert {c["block"] for c in copies} == {512}
        assert engine.startswith("SM kernel, nvbandwidth's striding copy from 64 MiB up")


def test_peer_copies_are_issued_on_the_issuing_context(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """nvbandwidth issues a peer copy with cuMemcpyAsync on the issuing GPU's context (the reader for a read,
    the writer for a write): cudaMemcpyAsync with that GPU current and on its stream, never
    cudaMemcpyPeerAsync. Which engine then runs it is for a GPU host to show (benchmarks/anchor_check.py)."""
    fake = configure(monkeypatch, tmp_path)
    for test in ("device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce"):
        report = probes.run_probes(gpu_box(2), profile_name=TINY, backend="cuda", tests=[test])
        assert {o.status for o in report.outcomes} == {Status.OK}, [o.reason for o in report.outcomes]
        engine = dict(report.outcomes[0].measurements[0].conditions)["engine"]
        assert "nvbandwidth's cuMemcpyAsync on the issuing context" in engine
    peers = fake.calls("memcpy_peer")
    assert peers and {c["api"] for c in peers} == {"cudaMemcpyAsync"}
    assert all(c["current"] == c["stream"] for c in peers)
    assert {c["stream"] for c in peers} == {0, 1}  # both GPUs issue: each pair read by one, written by the other
