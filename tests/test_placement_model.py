"""The cost model on small hand-built nodes: transfers that share a physical link share its bandwidth, the
ring order is chosen, measured numbers replace theoretical ones and say so, unknowns stay unknown, and the
other collectives follow nccl-tests' bus bandwidth definitions."""

from __future__ import annotations

import json

import pytest

import topology as t
from tests.placement_support import Switch, pcie_box
from topology import replace

GIB = 1 << 30
GEN4_X16 = 31.5e9 * 0.8  # the model's PCIe Gen4 x16, per direction (efficiency 0.8)
GEN4_X8 = GEN4_X16 / 2


def _ids(snap: t.Snapshot) -> list[str]:
    return [g.id for g in snap.gpus]


def _copy(a: str, b: str, value: float, *, direction: str = "a->b",
          source: t.Source = t.Source.MEASURED) -> t.Measurement:
    return t.Measurement(test="device_to_device_memcpy_write_ce", subjects=(a, b), direction=direction, value=value,
                         unit="bytes_per_second", source=source, method="ce-write", size_bytes=512 << 20)


def test_the_ring_order_is_chosen_not_given() -> None:
    """Two NVLink pairs on one socket: any given order gives the ring that keeps each pair adjacent."""
    snap = pcie_box([["gpu", "gpu", "gpu", "gpu"]], nvlinks=[(0, 1, 4), (2, 3, 4)])
    g = _ids(snap)
    given = t.collective_estimate(snap, [g[0], g[2], g[1], g[3]], GIB)
    assert given.seconds == t.collective_estimate(snap, g, GIB).seconds
    order = given.gpus
    assert {frozenset(p) for p in zip(order, order[1:] + order[:1], strict=True)} >= {frozenset(g[:2]),
                                                                                       frozenset(g[2:])}
    assert given.busbw_bytes_per_second == pytest.approx(GEN4_X16, rel=0.01)  # two hops on PCIe, none shared
    assert given.order_exact


def test_transfers_that_share_a_switch_uplink_share_its_bandwidth() -> None:
    """Switch A (x8 uplink) holds GPUs 0 and 1, switch B (x16) GPUs 2 and 3, on one root complex."""
    snap = pcie_box([[Switch(("gpu", "gpu"), width=8), Switch(("gpu", "gpu"))]])
    g = _ids(snap)
    pair = t.collective_estimate(snap, g[:2], GIB)  # under one switch: the uplink is not on the way
    assert pair.busbw_bytes_per_second == pytest.approx(GEN4_X16, rel=0.01)
    ring = t.collective_estimate(snap, g, GIB)  # the best ring crosses A's uplink once each way
    assert ring.bottleneck is not None and ring.bottleneck.kind == "pcie" and ring.bottleneck.flows == 1
    assert ring.busbw_bytes_per_second == pytest.approx(GEN4_X8, rel=0.01)
    a2a = t.collective_estimate(snap, g, GIB, t.Collective.ALL_TO_ALL)  # 0 and 1 each send to 2 and 3 at once
    neck = a2a.bottleneck
    assert neck is not None and neck.flows == pytest.approx(4.0)  # four transfers of a quarter each, one way
    assert neck.link == ring.bottleneck.link  # the x8 uplink: upstream port to root port
    assert neck.capacity_bytes_per_second == pytest.approx(GEN4_X8)
    # 0 and 1 each send 3/4 of the buffer, half of it across the uplink: GIB bytes over x8
    assert a2a.seconds == pytest.approx(GIB / GEN4_X8 + a2a.latency_seconds, rel=1e-6)


def test_transfers_across_sockets_share_the_smp_link() -> None:
    snap = pcie_box([["gpu", "gpu"], ["gpu", "gpu"]])
    a2a = t.collective_estimate(snap, _ids(snap), GIB, t.Collective.ALL_TO_ALL)
    neck = a2a.bottleneck
    assert neck is not None and (neck.kind, neck.a, neck.b) == ("numa", "numa0", "numa1")
    assert neck.flows == pytest.approx(4.0) and neck.source == "estimate"  # no rate in the snapshot: the default
    stated = pcie_box([["gpu", "gpu"], ["gpu", "gpu"]], smp_bytes_per_second=20e9)
    neck = t.collective_estimate(stated, _ids(stated), GIB, t.Collective.ALL_TO_ALL).bottleneck
    assert neck is not None and neck.source == "theoretical" and neck.capacity_bytes_per_second == 20e9


def test_a_link_trained_to_fewer_lanes_carries_less_and_is_avoided() -> None:
    snap = pcie_box([["gpu", "gpu", "gpu"]])
    narrow = t.PcieLinkState(current_gen=2, current_width=8, max_gen=4, max_width=16)  # idle gen, 8 lanes
    gpus = (replace(snap.gpus[0], pcie=narrow), *snap.gpus[1:])
    pci = tuple(replace(f, link=narrow) if f.id == gpus[0].id else f for f in snap.pci)
    snap = replace(snap, gpus=gpus, pci=pci)
    g = _ids(snap)
    assert t.collective_estimate(snap, g[:2], GIB).busbw_bytes_per_second == pytest.approx(GEN4_X8, rel=0.01)
    assert t.best_groups(snap, 2).groups[0].gpus == (g[1], g[2])


def test_a_measured_pair_replaces_the_theoretical_rate() -> None:
    snap = pcie_box([["gpu", "gpu"]])
    a, b = _ids(snap)
    slow = t.with_measurements(snap, [_copy(a, b, 10e9)])
    estimate = t.collective_estimate(slow, [a, b], GIB)
    assert estimate.busbw_bytes_per_second == pytest.approx(10e9, rel=0.01)
    assert estimate.bottleneck is not None and estimate.bottleneck.source == "measured"
    assert estimate.bottleneck.capacity_bytes_per_second == 10e9
    assert estimate.bottleneck.kind == "pcie"  # named as the physical link on the measured pair's way
    assert f"pair {a}->{b}" in estimate.sources()["measured"]
    fast = t.with_measurements(snap, [_copy(a, b, 28e9), _copy(a, b, 28e9, direction="b->a")])
    faster = t.collective_estimate(fast, [a, b], GIB)  # more than 0.8 x Gen4 x16 got through: the links can
    assert faster.busbw_bytes_per_second == pytest.approx(28e9, rel=0.01)
    assert {i.source for i in faster.inputs if i.what == "link"} == {"measured"}
    simulated = t.with_measurements(snap, [_copy(a, b, 10e9, source=t.Source.SIMULATED)])
    assert "simulated" in t.collective_estimate(simulated, [a, b], GIB).sources()


def test_a_measured_latency_is_the_step_latency() -> None:
    snap = pcie_box([["gpu", "gpu"]])
    a, b = _ids(snap)
    default = t.collective_estimate(snap, [a, b], 1)
    assert default.latency_seconds == pytest.approx(2 * t.model_assumptions()["pcie_step_latency_default_seconds"])
    lat = t.Measurement(test="device_to_device_latency_sm", subjects=(a, b), direction="a<->b", value=2e-6,
                        unit="seconds", source=t.Source.MEASURED, method="pointer-chase")
    measured = t.collective_estimate(t.with_measurements(snap, [lat]), [a, b], 1)
    assert measured.latency_seconds == pytest.approx(2 * 2e-6)  # 2(n-1) steps
    assert f"latency {a}->{b}" in measured.sources()["measured"]


def test_an_unknown_pcie_path_is_unknown_not_guessed() -> None:
    snap = pcie_box([["gpu", "gpu"]])
    a, b = _ids(snap)
    problems = tuple(t.Problem(source="pci", subject=g, message="unreadable",
                               unknown=(t.Fact(subject=g, aspect=t.Aspect.PCIE_PATH),)) for g in (a, b))
    unknown = t.collective_estimate(replace(snap, problems=problems), [a, b], GIB)
    assert unknown.seconds is None and unknown.busbw_bytes_per_second is None and unknown.bottleneck is None
    assert f"pcie path of {a}" in unknown.unknown


def test_the_other_collectives_follow_nccl_tests_bus_factors() -> None:
    """On one socket, four GPUs on their own root ports: every collective's bus bandwidth is the link rate."""
    snap = pcie_box([["gpu", "gpu", "gpu", "gpu"]])
    g = _ids(snap)
    for collective in t.Collective:
        estimate = t.collective_estimate(snap, g, 64 * GIB, collective)
        assert estimate.busbw_bytes_per_second == pytest.approx(GEN4_X16, rel=0.01), collective
        factor = 2 * 3 / 4 if collective is t.Collective.ALL_REDUCE else 3 / 4
        assert estimate.busbw_bytes_per_second == pytest.approx((estimate.algbw_bytes_per_second or 0) * factor)
    assert t.collective_estimate(snap, g, GIB, t.Collective.ALL_TO_ALL).algorithm is t.Algorithm.DIRECT


def test_a_group_of_one_costs_nothing_and_bad_groups_are_refused() -> None:
    snap = pcie_box([["gpu", "gpu"]])
    a = _ids(snap)[0]
    assert t.collective_estimate(snap, [a], GIB).seconds == 0.0
    with pytest.raises(ValueError, match="twice"):
        t.collective_estimate(snap, [a, a], GIB)
    with pytest.raises(ValueError, match="not a GPU"):
        t.collective_estimate(snap, [a, "0000:ff:00.0"], GIB)


def test_lost_excluded_and_mig_gpus_are_left_out_and_named() -> None:
    snap = pcie_box([["gpu", "gpu", "gpu"], ["gpu", "gpu", "gpu"]])
    g = _ids(snap)
    gpus = list(snap.gpus)
    gpus[1] = replace(gpus[1], lost=True)
    gpus[4] = replace(gpus[4], mig_enabled=True)
    snap = replace(snap, gpus=tuple(gpus))
    placement = t.best_groups(snap, 2, exclude=[0, g[5]], top=10)
    assert {(x.index, x.reason) for x in placement.left_out} == {(0, "excluded"), (5, "excluded"), (1, "lost"),
                                                               (4, "mig")}
    assert {x for grp in placement.groups for x in grp.gpus} == {g[2], g[3]}
    assert t.best_groups(snap, 2, include_lost=True, include_mig=True, top=20).left_out == ()
    none = t.best_groups(snap, 3, exclude=[0, 2])
    assert none.groups == () and none.note == "2 GPUs available, 3 asked for"
    with pytest.raises(t.PlacementError):
        t.best_groups(snap, 2, exclude=[9])
    with pytest.raises(t.PlacementError):
        t.best_groups(snap, 0)


def test_results_are_json_ready() -> None:
    snap = pcie_box([["gpu", "gpu"], ["gpu", "gpu"]], nvlinks=[(0, 1, 2)])
    placement = t.best_groups(snap, 2, top=2)
    doc = json.loads(json.dumps(placement.to_dict()))
    assert doc["source"] == "estimate" and doc["gpus"] == 2 and len(doc["groups"]) == 2
    best = doc["groups"][0]
    assert best["indices"] == [0, 1] and best["estimate"]["algorithm"] == "ring"
    assert best["estimate"]["bottleneck"]["kind"] == "nvlink"
    assert best["estimate"]["model"]["nvlink_efficiency"] == 0.8
    assert set(best["estimate"]["sources"]) == {"theoretical", "estimate"}
