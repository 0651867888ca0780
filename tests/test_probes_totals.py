"""nvbandwidth's all-to-one and one-to-all tests: every other GPU copies to (from) one GPU at once, and the
target's number is the TOTAL (every copy's bytes over the first start to the last end). Which copies, who
issues them, where the plan waives them, how the report shows them, and that no link's rate is taken for
their theoretical bound; then end to end on the fake CUDA runtime."""

from __future__ import annotations

from pathlib import Path

import pytest

import probes
import topology as t
from exporter._core._health import kind_of
from probes import FULL, QUICK, Capabilities, Device, Status, Target, make_plan
from probes.cuda._legs import TOTAL_TESTS, legs, peer_pairs
from probes.harness._report import versus_theoretical
from tests.fakecuda.cupy._machine import RATES
from tests.fakecuda_support import TINY, bus, configure, gpu_box, outcomes
from tests.probe_snapshots import G0, G1, G2, G3, four_gpu_box
from topology import replace

A = Target(id="0000:05:00.0", kind="gpu", index=0)
B = Target(id="0000:06:00.0", kind="gpu", index=1)
C = Target(id="0000:07:00.0", kind="gpu", index=2)
GPUS = (G0, G1, G2, G3)


def caps(ids: tuple[str, ...] = GPUS, peers: tuple[tuple[str, str], ...] | None = None) -> Capabilities:
    every = tuple((a, b) for a in ids for b in ids if a != b)
    return Capabilities(backend="cuda", devices=tuple(Device(id=g, ordinal=i) for i, g in enumerate(ids)),
                        peer_pairs=every if peers is None else peers)


def copies(test: str) -> list[tuple[str, str, str, str]]:
    return [(x.src.id, x.dst.id, x.issuer.id, x.engine) for x in legs(test, (A,), (B, C))]


def test_each_copy_goes_the_tests_way_and_is_issued_as_nvbandwidth_issues_it() -> None:
    a, b, c = A.id, B.id, C.id
    # CE: a write is issued on the source's stream (PREFER_SRC_CONTEXT), a read on the destination's
    assert copies("all_to_one_write_ce") == [(b, a, b, "ce"), (c, a, c, "ce")]
    assert copies("all_to_one_read_ce") == [(a, b, b, "ce"), (a, c, c, "ce")]  # the others pull from A
    assert copies("one_to_all_write_ce") == [(a, b, a, "ce"), (a, c, a, "ce")]
    assert copies("one_to_all_read_ce") == [(b, a, a, "ce"), (c, a, a, "ce")]  # A pulls from the others
    # SM: nvbandwidth prefers the source's context in every SM test; "read" only reverses the copies
    assert copies("all_to_one_write_sm") == [(b, a, b, "sm"), (c, a, c, "sm")]
    assert copies("all_to_one_read_sm") == [(a, b, a, "sm"), (a, c, a, "sm")]
    assert copies("one_to_all_write_sm") == [(a, b, a, "sm"), (a, c, a, "sm")]
    assert copies("one_to_all_read_sm") == [(b, a, b, "sm"), (c, a, c, "sm")]
    for test in TOTAL_TESTS:
        assert all(x.timed and x.scale == 1 for x in legs(test, (A,), (B, C)))  # every copy counts, one size
        assert peer_pairs(legs(test, (A,), (B, C))) == ((0, 1), (0, 2))


def test_plan_targets_each_gpu_with_every_other_as_its_copies() -> None:
    plan = make_plan(four_gpu_box(), FULL, caps())
    for test in TOTAL_TESTS:
        items = [i for i in plan.items if i.test == test]
        assert [i.subjects for i in items] == [(g,) for g in GPUS]
        first = items[0]
        assert [x.id for x in first.background] == [G1, G2, G3]
        assert first.memory_budget_bytes >= 2 * 3 * FULL.copy_bytes  # a source and a destination per copy
    quick = make_plan(four_gpu_box(), QUICK, caps())
    assert not {i.test for i in quick.items} & set(TOTAL_TESTS)  # the full profile's only


def test_waived_with_one_gpu_without_peers_and_beyond_eight_others() -> None:
    one = replace(four_gpu_box(), gpus=four_gpu_box().gpus[:1])
    plan = make_plan(one, FULL, caps((G0,)))
    assert {(w.subjects, w.reason) for w in plan.waived if w.test in TOTAL_TESTS} == {((), "needs two GPUs")}
    no_g3 = tuple(p for p in caps().peer_pairs if G3 not in p)
    plan = make_plan(four_gpu_box(), FULL, caps(peers=no_g3))
    why = {w.subjects: w.reason for w in plan.waived if w.test == "all_to_one_write_ce"}
    assert why[(G0,)] == f"no peer access between {G0} and {G3}: N/A (the total needs every pair)"
    assert why[(G3,)].startswith(f"no peer access between {G3} and {G0}, {G1}, {G2}")
    ten = gpu_box(10)
    plan = make_plan(ten, FULL, caps(tuple(bus(i) for i in range(10))))
    why = {w.subjects: w.reason for w in plan.waived if w.test == "one_to_all_read_sm"}
    assert len(why) == 10 and not [i for i in plan.items if i.test == "one_to_all_read_sm"]
    assert "would need peer access to all 9 other GPUs at once; over PCIe a device maps at most 8 peers" in why[
        (bus(0),)]
    switched = make_plan(nvswitch_box(10), FULL, caps(tuple(bus(i) for i in range(10))))
    assert len([i for i in switched.items if i.test == "one_to_all_read_sm"]) == 10  # no limit on NVSwitch
    nine = make_plan(gpu_box(9), FULL, caps(tuple(bus(i) for i in range(9))))
    assert len([i for i in nine.items if i.test == "one_to_all_read_sm"]) == 9  # 8 others: within the limit


def nvswitch_box(gpus: int) -> t.Snapshot:
    """``gpus`` fake GPUs on one NVSwitch fabric (every GPU's NVLinks to the one switch)."""
    sw = "nvswitch0"
    return replace(gpu_box(gpus), nvswitches=(t.NvSwitch(id=sw, visible_on_pci=False),), links=tuple(
        t.Link(a=bus(i), b=sw, kind=t.LinkKind.NVLINK, count=18, nvlink_version=4, bytes_per_second=450e9)
        for i in range(gpus)))


@pytest.mark.slow
def test_ten_gpus_on_nvswitch_map_all_nine_peers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = configure(monkeypatch, tmp_path, gpus=10, FAKECUDA_NVSWITCH="all")
    report = probes.run_probes(nvswitch_box(10), profile_name=TINY, backend="cuda", tests=["all_to_one_write_ce"])
    assert [o.status for o in report.outcomes] == [Status.OK] * 10, [o.reason for o in report.outcomes]
    assert max(c["mapped"] for c in fake.calls("peer_enable")) == 9 and not fake.calls("peer_refused")
    monkeypatch.delenv("FAKECUDA_NVSWITCH")
    fake = configure(monkeypatch, tmp_path / "pcie", gpus=10)  # the same plan on PCIe GPUs: the fake refuses
    caps = probes.harness.ask_capabilities("cuda")
    plan = make_plan(nvswitch_box(10), TINY, caps, tests=["all_to_one_write_ce"])
    (raw,) = probes.harness.run_items("cuda", plan.items[:1], startup_budget_s=60).values()
    assert raw.status is Status.WAIVED and "TooManyPeers" in raw.reason, raw.reason
    assert fake.calls("peer_refused")


def test_a_total_has_no_link_bound_and_is_no_pair_measurement() -> None:
    m = t.Measurement(test="all_to_one_write_ce", subjects=(G0,), direction="all->a", value=300e9,
                      unit="bytes_per_second", source=t.Source.MEASURED, method="ce-total")
    snap = four_gpu_box()
    assert t.LinkCapability(snap).of(m) is None
    assert kind_of(m) is None
    assert versus_theoretical(snap, [m]) == ""


@pytest.mark.slow
def test_totals_end_to_end(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = configure(monkeypatch, tmp_path, gpus=3)
    snap = gpu_box(3)
    report = probes.run_probes(snap, profile_name=TINY, backend="cuda", tests=list(TOTAL_TESTS))
    assert {o.status for o in report.outcomes} == {Status.OK}, [o.reason for o in report.outcomes]
    assert not fake.calls("staged_copy") and not fake.calls("peer_refused")
    enabled, disabled = fake.calls("peer_enable"), fake.calls("peer_disable")
    assert len(enabled) == len(disabled) == 8 * 3 * 2 * 2  # per item: the target with 2 others, both ways
    assert max(c["mapped"] for c in enabled) == 2
    for test in TOTAL_TESTS:
        done = outcomes(report, test)
        assert [o.subjects for o in done] == [(bus(i),) for i in range(3)]
        (m,) = done[0].measurements
        assert m.subjects == (bus(0),) and m.direction == ("all->a" if "one_write" in test or "all_read" in test
                                                            else "a->all")
        assert m.source is t.Source.SIMULATED and m.unit == "bytes_per_second"
        conditions = dict(m.conditions)
        assert conditions["total"].startswith("all 2 copies at once")
        assert f"{bus(1)}->{bus(0)}" in conditions["total"] or f"{bus(0)}->{bus(1)}" in conditions["total"]
        # two peer copies at once on the fake's clock: the total counts both sources' bytes
        assert m.value == pytest.approx(2 * RATES["peer"], rel=0.05)
    # SM copies run on the issuing GPU: in all_to_one_read_sm the target's kernels copy out to the others
    kernels = [c["device"] for c in fake.calls("kernel") if c["name"] == "topolink_copy_simple"]  # below 64 MiB
    assert set(kernels) == {0, 1, 2}
    text = probes.render_report(report, snap)
    assert "Running all_to_one_write_ce.\nmemcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)" in text
    assert "Running one_to_all_write_sm.\nmemcpy SM GPU(row) -> GPU(column) bandwidth (GB/s)" in text
    block = text.split("Running all_to_one_read_ce.\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(block) == 3 and block[2].split() == ["200.00"] * 3  # one row: the total per target GPU
