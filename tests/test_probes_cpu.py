"""The cpu backend end to end on this machine: NUMA-bound buffers whose placement is checked, copies checked
after every sample, the collectives over gloo across two forked ranks, in one child per pass, and
measurements with statistics that land in the snapshot JSON."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

import probes
import probes.cpu
import topology as t
from probes import Status
from probes.core._profiles import KiB, MiB
from probes.cpu._rank import rank_threads
from probes.harness._runner import execute
from probes.host._numa import HostBuffer, page_nodes, sample_pages
from tests.probe_snapshots import this_host

TINY = dataclasses.replace(probes.SELFTEST, name="tiny", copy_bytes=1 * MiB, copy_iters=4, samples=3,
                           host_collective_sizes=(64 * KiB, 256 * KiB), collective_iters=4)
HOST0 = probes.Target(id="numa0", kind="host", index=0, cpus=())


def test_buffer_bound_to_node_0_is_verified_page_by_page() -> None:
    buf = HostBuffer(8 * MiB, 0, tuple(this_host().numa_nodes[0].cpus))
    try:
        assert buf.placement.verified
        assert buf.placement.checked == 1024 == buf.placement.on_node  # 1024 pages sampled of 2048
        assert "move_pages" in buf.placement.describe()
    finally:
        buf.close()


def test_binding_without_libnuma_uses_the_system_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("probes.host._numa.libnuma", lambda: None)
    buf = HostBuffer(1 * MiB, 0, ())
    try:
        assert buf.placement.verified and "mbind system call" in buf.placement.how
        assert set(page_nodes(sample_pages(buf.ptr, buf.size, 4096))) == {0}
    finally:
        buf.close()


def test_a_node_that_does_not_exist_is_refused_not_assumed() -> None:
    with pytest.raises(probes.ProbeError, match="not on NUMA node 7"):
        HostBuffer(1 * MiB, 7, ())


def test_ranks_share_out_the_cpus_they_are_bound_to() -> None:
    assert rank_threads(((0, 1), (0, 1))) == (1, 1)  # two ranks on two CPUs: one thread each, not two
    assert rank_threads(((0, 1, 2, 3), (0, 1, 2, 3), (4, 5, 6, 7))) == (2, 2, 4)
    assert rank_threads(((0,), (0,), (0,))) == (1, 1, 1)  # never none
    assert rank_threads(((0, 1), (1, 2))) == (1, 1)  # overlapping sets share too
    here = len(os.sched_getaffinity(0))
    assert rank_threads(((), ())) == (max(1, here // 2),) * 2  # unbound: this process's CPUs


def test_sampled_pages_cover_the_buffer() -> None:
    pages = sample_pages(0, 1 << 30, 4096, 16)
    assert len(pages) == 16 and pages[0] == 0 and pages[-1] == (1 << 30) - 4096


@pytest.mark.slow
def test_cpu_probe_end_to_end_lands_in_the_snapshot_json() -> None:
    snap = this_host()
    seen: list[tuple[int, int]] = []
    with probes.ProbeProcess("cpu") as process:
        report = probes.run_probes(snap, profile_name=TINY, progress=lambda d, n, k: seen.append((d, n)),
                                   process=process)
        assert process.children_started == 1  # capabilities, copies and every collective: one child
    assert report.ran and report.backend == "cpu"
    assert seen[-1] == (6, 6)
    by_test = {o.test: o for o in report.outcomes}
    assert {o.status for o in report.outcomes} == {Status.OK}, [o.reason for o in report.outcomes]
    bus, alg, avg = by_test["all_reduce"].measurements
    assert bus.value == pytest.approx(alg.value)  # two ranks: 2(n-1)/n = 1
    assert bus.method == "gloo" and len(by_test["all_reduce"].sweep) == 4  # 2 sizes, in place only
    assert avg.direction == "avg_busbw" and avg.value == pytest.approx(
        sum(m.value for m in by_test["all_reduce"].sweep if m.direction == "busbw") / 2)
    cond = dict(bus.conditions)
    assert cond["ranks"] == "2" and cond["ranks_started"].startswith("forked from the probe process")
    cpus = snap.numa_nodes[0].cpus  # both ranks on node 0's CPUs: they share them out, as each rank reports
    assert cond["rank_threads"] == " ".join(map(str, rank_threads((cpus, cpus)))) == " ".join(
        [str(max(1, len(cpus) // 2))] * 2)
    for op, modes in (("all_gather", 2), ("reduce_scatter", 2), ("alltoall", 1)):
        assert len(by_test[op].sweep) == 2 * 2 * modes
        bus, alg, _ = by_test[op].measurements
        assert bus.value == pytest.approx(alg.value / 2)  # (n-1)/n with two ranks
    copy = by_test["host_memcpy"]
    (m,) = copy.measurements
    assert m.source is t.Source.MEASURED and m.value > 1e8  # any machine copies faster than 100 MB/s
    assert m.stats is not None and len(m.stats.samples) == 3 and m.stats.p5 <= m.stats.median <= m.stats.p95
    cond = dict(m.conditions)
    assert cond["src_placement"].startswith("node 0: 256/256 sampled pages on the node")
    assert cond["data_check"].startswith("every sample")
    (back,) = by_test["host_bidirectional_memcpy"].measurements
    assert back.direction == "a->b" and "twice the size back" in dict(back.conditions)["interference"]
    measured = probes.apply_report(snap, report)
    assert t.loads(t.dumps(measured)) == measured
    assert m in measured.measurements
    doc = json.loads(probes.report_json(report, snap))
    assert doc["schema"] == probes.REPORT_SCHEMA == "topolink.probe/v2" and doc["ran"] is True
    assert t.from_dict(doc["snapshot"]) == measured
    text = probes.render_report(report, snap)
    assert "Running host_memcpy." in text and "NUMA0" in text and "# Avg bus bandwidth" in text
    assert probes.render_bandwidth_matrix(snap).startswith("no measured bandwidth")
    assert "host_memcpy a->b" in probes.render_bandwidth_matrix(measured)


def test_a_copy_that_moved_nothing_fails_its_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    import probes.cpu._copy as copy

    monkeypatch.setattr(copy._Pair, "copy", lambda self, times: None)
    item = probes.Item(key="k", test="host_memcpy", targets=(HOST0, HOST0), sizes=(1 * MiB,), warmup=1, iters=2,
                       samples=3, wall_budget_s=30, memory_budget_bytes=1 << 30)
    raw = execute(probes.cpu.CpuBackend(), item)
    assert raw.status is Status.FAILED
    assert raw.reason == "data check failed at 1048576 bytes: sample 1: destination differs from source"


def test_failed_tests_become_problems_and_waived_ones_do_not() -> None:
    report = probes.ProbeReport(profile="quick", backend="cpu", outcomes=(
        probes.ProbeOutcome(test="all_reduce", subjects=("numa0", "numa0"), status=Status.WAIVED, reason="no torch"),
        probes.ProbeOutcome(test="host_memcpy", subjects=("numa0", "numa0"), status=Status.FAILED,
                            reason="killed at its wall-time budget of 9 s"),
    ))
    snap = probes.apply_report(this_host(), report)
    assert not report.ran
    assert snap.problems == (t.Problem(source="probe", subject="host_memcpy[numa0,numa0]",
                                       message="killed at its wall-time budget of 9 s"),)
    assert snap.measurements == ()
