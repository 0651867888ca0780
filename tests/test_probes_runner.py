"""The runner: budgets enforced on real child processes, and results assembled into measurements."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from probes import Item, Status, Target
from probes.core import RawResult, RawRow, spec
from probes.harness import ProbeProcess, ask_capabilities, run_items
from probes.harness._runner import assemble
from probes.harness._summary import peak
from topology import LinkCapability, Measurement, Source

MiB = 1 << 20
HOST = Target(id="numa0", kind="host", index=0, cpus=())


def copy_item(key: str, *, size: int = 4 * MiB, iters: int = 2, wall: float = 30.0,
              memory: int = 512 * MiB) -> Item:
    return Item(key=key, test="host_memcpy", targets=(HOST, HOST), sizes=(size,), warmup=1, iters=iters,
                samples=2, wall_budget_s=wall, memory_budget_bytes=memory)


@pytest.mark.slow
def test_an_overrun_is_killed_at_its_budget_and_the_rest_still_run() -> None:
    events: list[tuple[str, str]] = []
    hung = copy_item("hung", size=64 * MiB, iters=10**9, wall=1.5)
    results = run_items("cpu", [hung, copy_item("after")], startup_budget_s=60,
                        progress=lambda e, k: events.append((e, k)))
    assert results["hung"].status is Status.FAILED
    assert "killed at its wall-time budget of 2 s" in results["hung"].reason
    assert results["after"].status is Status.OK
    assert events == [("begin", "hung"), ("end", "hung"), ("begin", "after"), ("end", "after")]


@pytest.mark.slow
def test_memory_over_budget_is_reported() -> None:
    results = run_items("cpu", [copy_item("big", size=256 * MiB, memory=128 * MiB)], startup_budget_s=60)
    assert results["big"].status is Status.FAILED
    assert results["big"].reason.startswith("out of memory: mmap of 268435456 bytes failed")


@pytest.mark.slow
def test_a_child_that_cannot_start_fails_every_item_with_why() -> None:
    results = run_items("no_such_module:Backend", [copy_item("a"), copy_item("b")], startup_budget_s=60)
    assert {r.status for r in results.values()} == {Status.FAILED}
    assert "exited with status 1" in results["a"].reason and "no_such_module" in results["a"].reason
    caps = ask_capabilities("no_such_module:Backend")
    assert "no_such_module" in caps.error


def _scratch(pid: int) -> Path:
    """The TMPDIR the probe child ``pid`` was started with."""
    env = dict(v.split(b"=", 1) for v in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in v)
    return Path(env[b"TMPDIR"].decode())


def _wait_dead(pid: int) -> None:
    """Until ``pid`` (a child of this process, not yet reaped) is a zombie."""
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, f"{pid} still runs 30 s after SIGKILL"
        time.sleep(0.01)


@pytest.mark.slow
def test_one_child_runs_the_items_and_a_dead_one_is_replaced_before_the_next() -> None:
    """... and the temporary folder of each (its TMPDIR: gloo's store, a rank's files) is gone with it, killed
    or not: a child killed at its budget cannot remove its own."""
    with ProbeProcess("cpu", startup_budget_s=60) as process:
        assert not process.capabilities().error
        first = process.run(copy_item("first"))
        pid = process.pid
        assert first.status is Status.OK and pid is not None
        scratch = _scratch(pid)
        assert scratch.is_dir() and scratch.name.startswith("topolink-probe-")
        (scratch / "left-behind").write_text("a file the child made")
        os.kill(pid, signal.SIGKILL)  # dies between items, as a crash in a destructor would
        _wait_dead(pid)
        second = process.run(copy_item("second"))
        assert second.status is Status.OK, second.reason
        assert process.children_started == 2 and process.pid != pid
        assert not scratch.exists()
        assert process.pid is not None
        second_scratch = _scratch(process.pid)
        assert second_scratch.is_dir()
    assert not second_scratch.exists()


def test_copy_bandwidth_is_bytes_times_copies_over_time() -> None:
    item = copy_item("k")
    raw = RawResult(key="k", status=Status.OK, versions=(("python", "3"),), conditions=(("cpus", "0"),),
                    rows=(RawRow(size=4 * MiB, bytes_per_op=4 * MiB, ops=16, seconds=((0.008,), (0.004,), (0.005,))),))
    out = assemble(spec("cpu", "host_memcpy"), item, raw, taken_at=1.0)
    (m,) = out.measurements
    assert m.value == pytest.approx(4 * MiB * 16 / 0.005)  # the median sample
    assert m.stats is not None and m.stats.samples[0] == pytest.approx(4 * MiB * 16 / 0.008)
    assert (m.unit, m.method, m.backend, m.size_bytes, m.direction) == ("bytes_per_second", "memcpy", "cpu",
                                                                          4 * MiB, "a->b")
    assert m.source.value == "measured" and m.conditions == (("cpus", "0"),) and m.versions == (("python", "3"),)


def test_bidirectional_total_is_the_sum_of_the_directions_medians() -> None:
    a, b = Target(id="A", kind="gpu", index=0), Target(id="B", kind="gpu", index=1)
    item = Item(key="k", test="device_to_device_bidirectional_memcpy_write_ce", targets=(a, b), sizes=(100,),
                warmup=0, iters=10, samples=3, wall_budget_s=1, memory_budget_bytes=1)
    # per sample (a->b, b->a) rates: (1000, 100), (100, 1000), (500, 500): sums 1100, 1100, 1000
    seconds = ((1.0, 10.0), (10.0, 1.0), (2.0, 2.0))
    raw = RawResult(key="k", status=Status.OK, rows=(RawRow(size=100, bytes_per_op=100, ops=10, seconds=seconds),))
    ms = {m.direction: m for m in assemble(spec("cuda", item.test), item, raw, taken_at=0).measurements}
    assert ms["a->b"].value == ms["b->a"].value == 500.0
    total = ms["a<->b"]
    assert total.value == 1000.0  # nvbandwidth: 500 + 500, not the median of per-sample sums (1100)
    assert total.stats is not None and total.stats.samples == (1100.0, 1100.0, 1000.0)
    assert dict(total.conditions)["total"] == "sum of the directions' medians (nvbandwidth)"


def test_latency_is_seconds_per_access() -> None:
    h, g = Target(id="numa0", kind="host"), Target(id="G", kind="gpu", index=0)
    item = Item(key="k", test="host_device_latency_sm", targets=(h, g), sizes=(2 * MiB,), warmup=0,
                iters=1_000_000, samples=1, wall_budget_s=1, memory_budget_bytes=1)
    raw = RawResult(key="k", status=Status.OK, rows=(RawRow(size=2 * MiB, bytes_per_op=2 * MiB, ops=1_000_000,
                                                           seconds=((0.8,),)),))
    (m,) = assemble(spec("cuda", item.test), item, raw, taken_at=0).measurements
    assert (m.value, m.unit, m.method) == (pytest.approx(800e-9), "seconds", "pointer-chase")


def test_all_reduce_sweep_best_and_nccl_tests_average_over_sizes_and_modes() -> None:
    gpus = tuple(Target(id=f"G{i}", kind="gpu", index=i) for i in range(4))
    item = Item(key="k", test="all_reduce", targets=gpus, sizes=(1 * MiB, 4 * MiB, 16 * MiB), warmup=1, iters=20,
                samples=1, wall_budget_s=1, memory_budget_bytes=1)
    times = {1 * MiB: (0.02, 0.04), 4 * MiB: (0.04, 0.02), 16 * MiB: (0.1, 0.1)}  # (out of place, in place)
    rows = tuple(RawRow(size=s, bytes_per_op=s, ops=20, seconds=(t,)) for s, t in times.items())
    out = assemble(spec("cuda", "all_reduce"), item, RawResult(key="k", status=Status.OK, rows=rows), taken_at=0)
    assert len(out.sweep) == 12  # 3 sizes x 2 modes x (algbw, busbw)
    assert {dict(m.conditions)["mode"] for m in out.sweep} == {"out of place", "in place"}
    bus, alg, avg = out.measurements
    assert (bus.direction, alg.direction, avg.direction) == ("busbw", "algbw", "avg_busbw")
    assert bus.size_bytes == alg.size_bytes == 4 * MiB  # 4 MiB x 20 / 0.02 s in place beats all others
    assert dict(bus.conditions)["mode"] == dict(alg.conditions)["mode"] == "in place"
    assert alg.value == pytest.approx(4 * MiB * 20 / 0.02)
    assert bus.value == pytest.approx(alg.value * 2 * 3 / 4)  # nccl-tests: x 2(n-1)/n
    cells = [s * 20 / t * 1.5 for s, pair in times.items() for t in pair]
    assert avg.value == pytest.approx(sum(cells) / 6)  # nccl-tests' "Avg bus bandwidth": every cell, both modes
    assert avg.size_bytes is None and avg.stats is None and "mean busbw of 6 cells" in dict(avg.conditions)["average"]
    assert peak(()) == ()


@pytest.mark.parametrize("asked", ["graph", "stream"])
def test_each_cell_keeps_its_timing_mode_and_summaries_take_one_mode(asked: str) -> None:
    """Two sizes timed as graph launches, two on the stream (a capture refused part-way), one cell whose two
    windows were timed both ways: each cell says its own mode, the peak and the average come from one mode
    (on a tie, the one asked for), and the mixed cell joins neither."""
    gpus = tuple(Target(id=f"G{i}", kind="gpu", index=i) for i in range(2))
    sizes = (1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB)
    item = Item(key="k", test="all_reduce", targets=gpus, sizes=sizes, warmup=1, iters=20, samples=2,
                wall_budget_s=1, memory_budget_bytes=1, options=(("timing", asked),), profile="full")
    modes = {1 * MiB: ("graph", "graph"), 2 * MiB: ("graph", "graph"), 4 * MiB: ("stream", "stream"),
             8 * MiB: ("stream", "stream")}
    rows = tuple(RawRow(size=s, bytes_per_op=s, ops=20, seconds=((0.01, 0.01), (0.01, 0.01)),
                        timing=(modes[s], modes[s] if s != 8 * MiB else ("graph", "stream"))) for s in sizes)
    texts = (("timing_graph", "graph text"), ("timing_stream", "stream text"), ("nccl", "2.28"))
    raw = RawResult(key="k", status=Status.OK, rows=rows, conditions=texts)
    out = assemble(spec("cuda", "all_reduce"), item, raw, taken_at=0)
    for m in out.sweep:
        cond = dict(m.conditions)
        assert "timing_graph" not in cond and "timing_stream" not in cond and cond["profile"] == "full"
        if m.size_bytes == 8 * MiB and cond["mode"] == "out of place":  # its second window: graph
            assert cond["timing_mode"] == "mixed" and "graph in 1 sample(s), stream in 1 sample(s)" in cond["timing"]
            continue
        want = modes[m.size_bytes or 0][0]
        assert (cond["timing_mode"], cond["timing"]) == (want, f"{want} text")
    bus, alg, avg = out.measurements
    chosen = "graph"  # 4 graph cells, 3 stream cells and a mixed one: graph has the most, whatever was asked
    kept = [m for m in out.sweep if m.direction == "busbw" and dict(m.conditions)["timing_mode"] == chosen]
    assert len(kept) == 4 and avg.value == pytest.approx(sum(m.value for m in kept) / 4)
    assert bus.value == max(m.value for m in kept) and bus.size_bytes == 2 * MiB
    for m in (bus, alg, avg):
        assert dict(m.conditions)["timing_mode"] == chosen
        assert dict(m.conditions)["summary"] == ("from the 4 busbw cell(s) timed as CUDA graph launches; 4 cell(s) "
                                                 "timed otherwise left out (see each cell's timing_mode)")
    tie = tuple(RawRow(size=r.size, bytes_per_op=r.size, ops=20, seconds=r.seconds, timing=(modes[r.size],) * 2)
                for r in rows)
    out = assemble(spec("cuda", "all_reduce"), item, RawResult(key="k", status=Status.OK, rows=tie), taken_at=0)
    assert {dict(m.conditions)["timing_mode"] for m in out.measurements} == {asked}  # 4 and 4: the one asked


def test_numbers_from_a_test_double_are_labelled_simulated() -> None:
    item = copy_item("k")
    raw = RawResult(key="k", status=Status.OK, simulated="fake CUDA runtime",
                    rows=(RawRow(size=4 * MiB, bytes_per_op=4 * MiB, ops=2, seconds=((0.01,),)),))
    (m,) = assemble(spec("cpu", "host_memcpy"), item, raw, taken_at=0).measurements
    assert m.source is Source.SIMULATED and dict(m.conditions)["simulated"] == "fake CUDA runtime"


def test_not_run_is_never_a_number() -> None:
    item = copy_item("k")
    out = assemble(spec("cpu", "host_memcpy"), item,
                   RawResult(key="k", status=Status.FAILED, reason="out of memory"), taken_at=0)
    assert (out.status, out.reason, out.measurements) == (Status.FAILED, "out of memory", ())


@pytest.mark.parametrize(("gen", "width", "rate", "refused"), [
    (3, 16, 12e9, False), (3, 16, 15.75e9 * 1.5 * 1.01, True), (5, 16, 60e9, False), (4, 8, 60e9, True),
])
def test_a_copy_above_what_its_path_carries_is_refused_as_measured(gen: int, width: int, rate: float,
                                                                   refused: bool) -> None:
    from topology import Gpu, LinkCapability, PcieLinkState, Snapshot

    snap = Snapshot(node="n", gpus=(Gpu(id="0000:01:00.0", pcie=PcieLinkState(max_gen=gen, max_width=width)),))
    h, g = Target(id="numa0", kind="host"), Target(id="0000:01:00.0", kind="gpu", index=0)
    item = Item(key="k", test="host_to_device_memcpy_ce", targets=(h, g), sizes=(MiB,), warmup=0, iters=1,
                samples=1, wall_budget_s=1, memory_budget_bytes=1)
    raw = RawResult(key="k", status=Status.OK, rows=(RawRow(size=MiB, bytes_per_op=MiB, ops=1,
                                                           seconds=((MiB / rate,),)),))
    out = assemble(spec("cuda", item.test), item, raw, taken_at=0, cap=LinkCapability(snap))
    assert (out.status is Status.FAILED) is refused and bool(out.measurements) is not refused
    if refused:
        assert out.reason.startswith("refused as measured: ") and "times the" in out.reason


def test_only_the_full_profiles_figures_are_compared_with_the_theoretical_rate() -> None:
    from probes.harness._report import versus_theoretical
    from tests.probe_snapshots import G0, G1, four_gpu_box

    def copy(gpu: str, profile: str) -> Measurement:
        return Measurement(test="host_to_device_memcpy_ce", subjects=("numa0", gpu), direction="a->b", value=20e9,
                           unit="bytes_per_second", source=Source.MEASURED, method="ce",
                           conditions=(("profile", profile),))

    snap = four_gpu_box()
    text = versus_theoretical(snap, [copy(G0, "full"), copy(G1, "quick")])
    assert "GPU0" in text and "GPU1" not in text
    assert text.endswith("Not compared with the theoretical rates: the figures of the quick profile (smaller than "
                         "full's, they read below it on fast links; --profile full compares)")
    assert LinkCapability.compares(copy(G0, "full")) and not LinkCapability.compares(copy(G0, "quick"))
