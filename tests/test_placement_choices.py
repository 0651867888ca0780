"""On every machine profile (each modelled on a real ``nvidia-smi topo -m`` output in tests/data/topo), the
groups ``best_groups`` picks are the ones an expert would pick, for the reason written beside each check.
Where the profile has a real reference, the check reads the real output (its NV# cells, its NUMA affinity
column), not our own snapshot of it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

import topology as t
from tests import topo_reference
from tests.fakenvml import MACHINES, write_scaled
from tests.placement_support import TWO_LEVEL_SWITCHES, TWO_LEVEL_SWITCHES_16, by_index, discover_profile

PROFILES = sorted(p.stem for p in MACHINES.glob("*.yaml"))
Check = Callable[[t.Snapshot, t.Placement], None]


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, t.Snapshot]:
    out = {name: discover_profile(name, tmp_path_factory.mktemp(name)) for name in PROFILES}
    out["pcie-2level-8x"] = discover_profile("rtx4090-8x", tmp_path_factory.mktemp("two-level"), TWO_LEVEL_SWITCHES)
    out["pcie-2level-16x"] = discover_profile("rtx4090-8x", tmp_path_factory.mktemp("two-level-16"),
                                              TWO_LEVEL_SWITCHES_16)
    grown = tmp_path_factory.mktemp("hgx-x16")
    out["hgx-h100-x16"] = discover_profile(str(write_scaled(MACHINES / "hgx-h100.yaml", 16, grown)), grown / "m")
    return out


def _reference(snap: t.Snapshot, profile: str) -> topo_reference.TopoReference:
    machine = (MACHINES / f"{profile}.yaml").read_text()
    name = next(line.split(":", 1)[1].strip() for line in machine.splitlines() if line.startswith("reference:"))
    return topo_reference.load(name)


def _names(snap: t.Snapshot, gpus: tuple[str, ...]) -> list[str]:
    index = {v: k for k, v in by_index(snap).items()}
    return [f"GPU{index[g]}" for g in gpus]


def _cells(ref: topo_reference.TopoReference, names: list[str]) -> set[str]:
    return {ref.cell(a, b) for a, b in itertools.combinations(names, 2)}


def nvlink_pairs(profile: str, cell: str) -> Check:
    def check(snap: t.Snapshot, placement: t.Placement) -> None:
        ref = _reference(snap, profile)
        best = placement.groups[0]
        assert _cells(ref, _names(snap, best.gpus)) == {cell}
        assert best.estimate.bottleneck is not None and best.estimate.bottleneck.kind == "nvlink"
    return check


def one_socket(profile: str | None) -> Check:
    def check(snap: t.Snapshot, placement: t.Placement) -> None:
        best = placement.groups[0]
        if profile is not None:  # the real output's NUMA affinity column: one node for the whole group
            ref = _reference(snap, profile)
            assert len({ref.numa_affinity[name] for name in _names(snap, best.gpus)}) == 1
        assert len({g.memory_affinity for g in snap.gpus if g.id in best.gpus}) == 1
        kinds = {i.subject.split(":")[0] for i in best.estimate.inputs if i.what == "link"}
        assert "numa" not in kinds  # no transfer crosses the SMP interconnect
    return check


def pairs_of_one_socket(profile: str) -> Check:
    def check(snap: t.Snapshot, placement: t.Placement) -> None:
        one_socket(profile)(snap, placement)
        ref = _reference(snap, profile)
        names = _names(snap, placement.groups[0].gpus)
        bridged = [(a, b) for a, b in itertools.combinations(names, 2) if ref.cell(a, b).startswith("NV")]
        assert len(bridged) == len(names) // 2
    return check


def any_group(n: int) -> Check:
    """On an NVSwitch machine every GPU reaches every other at its full NVLink rate: any N are as good."""
    def check(snap: t.Snapshot, placement: t.Placement) -> None:
        model = t.CostModel(snap)
        seconds = {model.estimate(g, placement.size_bytes).seconds
                   for g in itertools.combinations([x.id for x in snap.gpus], n)}
        assert len({round(s or 0.0, 12) for s in seconds}) == 1
        assert placement.groups[0].estimate.seconds == pytest.approx(seconds.pop())
        assert placement.groups[0].estimate.bottleneck is not None
        assert placement.groups[0].estimate.bottleneck.kind == "nvlink"
    return check


def everything(snap: t.Snapshot, placement: t.Placement) -> None:
    assert set(placement.groups[0].gpus) == {g.id for g in snap.gpus}


def under_one_switch(levels: int) -> Check:
    """Under one PCIe switch (``levels`` = 1: one leaf switch; 2: one top switch, two leaves)."""
    def check(snap: t.Snapshot, placement: t.Placement) -> None:
        best = placement.groups[0].gpus
        classes = {str(t.path(snap, a, b)) for a, b in itertools.combinations(best, 2)}
        assert classes == ({"PIX"} if levels == 1 else {"PIX", "PXB"})
        assert {i.subject.split(":")[0] for i in placement.groups[0].estimate.inputs if i.what == "link"} == {"pcie"}
    return check


def one_board(snap: t.Snapshot, placement: t.Placement) -> None:
    """A synthetic machine of two HGX boards on one NVLink fabric: every GPU reaches every other at full NVLink
    rate, so the board's own 8 (its two sockets, not three or four) are the pick."""
    best = placement.groups[0]
    ids = [g.id for g in sorted(snap.gpus, key=lambda g: g.index or 0)]
    across = t.collective_estimate(snap, ids[:4] + ids[8:12], placement.size_bytes)
    assert best.estimate.seconds == pytest.approx(across.seconds)
    assert len({g.id.split(":")[0] for g in snap.gpus if g.id in best.gpus}) == 1  # one board's PCI domain
    assert len({g.numa_node for g in snap.gpus if g.id in best.gpus}) == 2
    assert not placement.exhaustive  # 16 GPUs: the structured search


def none_fits(snap: t.Snapshot, placement: t.Placement) -> None:
    assert placement.groups == () and "available" in placement.note


# (profile, N, check, why an expert picks it)
EXPERT: list[tuple[str, int, Check, str]] = [
    ("a6000-8x-nvlink-pairs", 2, nvlink_pairs("a6000-8x-nvlink-pairs", "NV4"),
     "a bridged pair: four NVLinks beat one PCIe Gen4 x16 link several times over"),
    ("a6000-8x-nvlink-pairs", 4, pairs_of_one_socket("a6000-8x-nvlink-pairs"),
     "two bridged pairs of one socket: only two hops on PCIe, none across the SMP link"),
    ("a6000-8x-nvlink-pairs", 8, everything, "the only group of 8"),
    ("a30-4x-nvlink-pairs", 2, nvlink_pairs("a30-4x-nvlink-pairs", "NV4"), "a bridged pair (NV4)"),
    ("a30-4x-nvlink-pairs", 4, everything, "the only group of 4"),
    ("rtx4090-8x", 2, one_socket("rtx4090-8x"), "PCIe only: two GPUs of one socket stay off the SMP link"),
    ("rtx4090-8x", 4, one_socket("rtx4090-8x"), "PCIe only: one socket's four GPUs, no hop across sockets"),
    ("pcie-2level-8x", 2, under_one_switch(1),
     "two levels of PCIe switches: a pair under one leaf switch loads neither leaf's uplink"),
    ("pcie-2level-8x", 4, under_one_switch(2),
     "two levels of switches: the four GPUs under one top switch, one socket"),
    ("pcie-2level-16x", 4, under_one_switch(1), "four GPUs under one leaf switch"),
    ("pcie-2level-16x", 8, under_one_switch(2), "the eight GPUs under one top switch, one socket"),
    ("dgx1-v100", 2, nvlink_pairs("dgx1-v100", "NV2"), "hybrid cube-mesh: a pair joined by two NVLinks"),
    ("dgx1-v100-vm", 2, nvlink_pairs("dgx1-v100-vm", "NV2"), "hybrid cube-mesh: a pair joined by two NVLinks"),
    ("dgx1-v100", 8, everything, "the only group of 8"),
    ("hgx-h100", 8, any_group(8), "NVSwitch: any 8 (and there are 8)"),
    ("hgx-h100", 4, any_group(4), "NVSwitch: any 4 are as good"),
    ("hgx-h100", 4, one_socket("hgx-h100"), "among equals, one socket's GPUs (near their CPUs and NICs)"),
    ("dgx-a100", 8, any_group(8), "NVSwitch: any 8"),
    ("dgx-a100", 2, any_group(2), "NVSwitch: any 2 are as good"),
    ("gb200-tray", 4, any_group(4), "NVLink 5 to the NVL72 switch trays: any 4"),
    ("gb200-tray", 2, any_group(2), "NVLink 5 to the switch trays: any 2"),
    ("gb200-tray-rack", 4, any_group(4), "the same tray, its rack named: any 4"),
    ("gb200-tray-degraded-bw", 4, any_group(4), "the fabric degraded for every GPU alike: still any 4"),
    ("hgx-h100-x16", 8, one_board, "NVSwitch across two boards: any 8 as fast; one board's 8 span fewest sockets"),
    ("rtx5090-2x", 2, everything, "the only pair"),
    ("gh200", 2, none_fits, "one GPU: no group of 2, and the answer says so"),
]


def test_every_profile_has_an_expert_choice() -> None:
    assert {p for p, *_ in EXPERT} >= set(PROFILES)


@pytest.mark.parametrize(("profile", "n", "check", "why"), EXPERT, ids=[f"{p}-{n}" for p, n, *_ in EXPERT])
def test_the_chosen_group_is_the_one_an_expert_would_choose(snapshots: dict[str, t.Snapshot], profile: str, n: int,
                                                            check: Check, why: str) -> None:
    snap = snapshots[profile]
    placement = t.best_groups(snap, n)
    check(snap, placement)
    assert placement.source == "estimate"
    assert all(g.estimate.source == "estimate" for g in placement.groups)
    assert placement.optimal, why


@pytest.mark.parametrize("profile", [*PROFILES, "pcie-2level-8x"])
def test_the_structured_search_finds_what_enumeration_finds(snapshots: dict[str, t.Snapshot], profile: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The candidates built from sockets, islands and switches hold a best group on every real layout."""
    from topology.placement import _best_groups as _placement

    snap = snapshots[profile]
    for n in range(2, len(snap.gpus) + 1):
        exhaustive = t.best_groups(snap, n, top=1)
        monkeypatch.setattr(_placement, "EXACT_GPUS", 0)
        structured = t.best_groups(snap, n, top=1)
        monkeypatch.undo()
        assert not structured.exhaustive and exhaustive.exhaustive
        assert structured.groups[0].estimate.seconds == pytest.approx(exhaustive.groups[0].estimate.seconds), n


def test_the_estimate_names_a_physical_link_as_its_bottleneck(snapshots: dict[str, t.Snapshot]) -> None:
    snap = snapshots["rtx4090-8x"]
    estimate = t.best_groups(snap, 8).groups[0].estimate
    neck = estimate.bottleneck
    assert neck is not None and (neck.kind, neck.a, neck.b) == ("numa", "numa0", "numa1")
    assert neck.source == "estimate"
    assert neck.capacity_bytes_per_second == t.model_assumptions()["smp_default_bytes_per_second"]
    assert neck.flows == pytest.approx(1.0)  # the best ring crosses the sockets once each way
    sources = estimate.sources()
    assert set(sources) == {"theoretical", "estimate"}  # nothing measured on this node yet
    assert any(s.startswith("link pcie:") for s in sources["theoretical"])

