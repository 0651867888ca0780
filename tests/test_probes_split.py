"""nvbandwidth's split-warp SM copies between host and GPU (the bidirectional SM host tests): one kernel,
one thread per 16-byte word, odd warps one way and even warps the other, half the bytes reported as each
direction's; the all-host forms run it on every GPU at once. Pure parts first, then the fake CUDA runtime."""

from __future__ import annotations

from pathlib import Path

import pytest

import probes
import topology as t
from probes import FULL, QUICK, Capabilities, Device, Status, Target, make_plan
from probes.cuda._kernels import split_copy_bytes, split_geometry
from probes.cuda._legs import SPLIT_TESTS, legs
from tests.fakecuda.cupy._machine import RATES
from tests.fakecuda_support import TINY, bus, configure, gpu_box, outcomes
from tests.probe_snapshots import G0, four_gpu_box
from topology import replace

H = Target(id="numa0", kind="host", index=0, cpus=(0,))
H1 = Target(id="numa1", kind="host", index=1, cpus=(1,))
A = Target(id="0000:05:00.0", kind="gpu", index=0)
B = Target(id="0000:06:00.0", kind="gpu", index=1)
C = Target(id="0000:07:00.0", kind="gpu", index=2)


def shape(test: str, targets: tuple[Target, ...], background: tuple[Target, ...] = ()) -> list[tuple[object, ...]]:
    return [(x.src.id, x.dst.id, x.issuer.id, x.engine, x.scale, x.timed) for x in legs(test, targets, background)]


def test_split_legs_are_nvbandwidths_buffers() -> None:
    one = [(H.id, A.id, A.id, "sm-split", 1, True)]
    assert shape("host_to_device_bidirectional_memcpy_sm", (H, A)) == one
    assert shape("device_to_host_bidirectional_memcpy_sm", (H, A)) == one  # nvbandwidth: the very same copy
    # every other GPU runs the same split copy with its own node, of the same size (not twice), untimed
    others = [(B.id, H.id, B.id, "sm-split", 1, False), (C.id, H1.id, C.id, "sm-split", 1, False)]
    assert shape("all_to_host_bidirectional_memcpy_sm", (H, A), (H, B, H1, C)) == [
        (A.id, H.id, A.id, "sm-split", 1, True), *others]
    assert shape("host_to_all_bidirectional_memcpy_sm", (H, A), (H, B, H1, C)) == [*one, *others]


def test_one_record_and_one_method_per_split_figure() -> None:
    specs = [probes.core.spec("cuda", name) for name in SPLIT_TESTS]
    assert {(s.method, s.channels) for s in specs} == {("sm-split-warp", ("a<->b",))}
    # every other kind of test keeps one method name per kind: copy engine, SM kernel, totals
    names = {s.method for s in probes.CUDA_SPECS if s.kind is probes.core.Kind.COPY and s.name not in SPLIT_TESTS}
    assert names == {"ce", "sm", "ce-read", "ce-write", "sm-read", "sm-write", "ce-total", "sm-total"}


def test_split_geometry_is_one_thread_per_word_in_blocks_of_1024() -> None:
    assert split_geometry(256 << 10) == (16, 1024)
    assert split_copy_bytes(256 << 10) == 256 << 10
    assert split_copy_bytes(512 << 20) == 512 << 20  # no truncation to the SM grid, unlike the SM copy
    assert split_geometry(1000) == (1, 62) and split_copy_bytes(1000) == 992
    assert split_geometry(8) == (0, 0) and split_copy_bytes(8) == 0


def test_split_tests_in_the_plan() -> None:
    gpus = tuple(g.id for g in four_gpu_box().gpus)
    caps = Capabilities(backend="cuda", devices=tuple(Device(id=g, ordinal=i) for i, g in enumerate(gpus)))
    plan = make_plan(four_gpu_box(), FULL, caps)
    both = next(i for i in plan.items if i.test == "all_to_host_bidirectional_memcpy_sm" and i.subjects[1] == G0)
    assert [x.id for x in both.background][1::2] == list(gpus[1:])
    assert both.memory_budget_bytes == 16 * 2**30 + 2 * FULL.copy_bytes * 4  # one pair of buffers per GPU
    assert not {i.test for i in make_plan(four_gpu_box(), QUICK, caps).items} & set(SPLIT_TESTS)
    snap = replace(four_gpu_box(), gpus=four_gpu_box().gpus[:1])
    one = make_plan(snap, FULL, Capabilities(backend="cuda", devices=(Device(id=G0, ordinal=0),)))
    assert {w.reason for w in one.waived if w.test == "all_to_host_bidirectional_memcpy_sm"} == {
        "needs two GPUs (with one, it is the plain host copy)"}
    assert [i.subjects[1] for i in one.items if i.test == "host_to_device_bidirectional_memcpy_sm"] == [G0, G0]


@pytest.mark.slow
def test_split_copies_end_to_end(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = configure(monkeypatch, tmp_path, gpus=2)
    snap = gpu_box(2)
    report = probes.run_probes(snap, profile_name=TINY, backend="cuda", tests=list(SPLIT_TESTS))
    assert {o.status for o in report.outcomes} == {Status.OK}, [o.reason for o in report.outcomes]
    launches = [c for c in fake.calls("kernel") if c["name"] == "topolink_copy_split"]
    assert {(c["grid"], c["block"]) for c in launches} == {(16, 1024)}  # one thread per word of 256 KiB
    # the all-host forms: every GPU's kernel at once; the host-device ones: the GPU's own
    assert {c["device"] for c in launches} == {0, 1}
    for test in SPLIT_TESTS:
        for o in outcomes(report, test):
            (m,) = o.measurements
            assert m.method == "sm-split-warp" and m.source is t.Source.SIMULATED
            assert m.direction == "a<->b"  # one figure, one record: never a->b and b->a holding one number
            assert "split-warp SM kernel" in dict(m.conditions)["engine"]
            assert dict(m.conditions)["bidirectional"].startswith("one figure for both directions")
            # the kernel moves 256 KiB both ways together at the fake's host rate; half is each direction's
            assert m.value == pytest.approx(RATES["h2d"] / 2, rel=0.05)
    both = outcomes(report, "all_to_host_bidirectional_memcpy_sm")[0].measurements[0]
    assert dict(both.conditions)["interference"].startswith("1 untimed copies of the same size, both ways")
    text = probes.render_report(report, snap)
    for test in SPLIT_TESTS:
        assert f"Running {test}.\nmemcpy SM CPU(row) <-> GPU(column) bandwidth (GB/s)" in text
    assert f"{bus(0)}" in dict(both.conditions)["interference"] or f"{bus(1)}" in dict(both.conditions)["interference"]


@pytest.mark.slow
def test_a_failed_odd_warp_copy_is_caught(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The set-up fills the GPU buffer and clears the warps that will write into it on one stream: were the
    fill left on the legacy stream, the fake would run it after the clear (as CUDA may), the buffer would hold
    the pattern already, and odd warps that copy nothing would pass the check."""
    configure(monkeypatch, tmp_path, gpus=1, FAKECUDA_SPLIT_FAULT="odd")
    report = probes.run_probes(gpu_box(1), profile_name=TINY, backend="cuda",
                               tests=["host_to_device_bidirectional_memcpy_sm"])
    assert report.outcomes and {o.status for o in report.outcomes} == {Status.FAILED}
    assert all("data check failed" in o.reason for o in report.outcomes), [o.reason for o in report.outcomes]
