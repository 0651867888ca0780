"""``fleet_report``: nodes grouped by NVLink domain and GPU product, fleet medians, outliers under 0.8 of
their peers' median, and where a group of N GPUs fits best (one node, one NVLink domain, or over NICs)."""

from __future__ import annotations

import json

import pytest

import topology as t

GB = 1e9
CLIQUE = "3f6c2a1e-8d4b-4c2f-9a57-0e1b2c3d4e5f.1"


def _tray(i: int, four: float = 713 * GB) -> t.NodeSummary:
    """A GB200 compute tray of an NVL72 rack: 4 GPUs, NVLink 5 (900 GB/s a GPU), 4 NICs of 400 Gb/s."""
    return t.NodeSummary(node=f"tray-{i:02d}", product="NVIDIA GB200", gpus=4, clique=CLIQUE,
                         busbw=((2, 716 * GB), (4, four)), nvlink_bytes_per_second=900 * GB,
                         nic_bytes_per_second=4 * 50 * GB)


def _hgx(i: int) -> t.NodeSummary:
    """An HGX H100 node: its own NVLink domain, 8 NICs of 400 Gb/s."""
    return t.NodeSummary(node=f"hgx-{i}", product="NVIDIA H100 80GB HBM3", gpus=8,
                         busbw=((2, 359 * GB), (4, 358 * GB), (8, 417 * GB)), nvlink_bytes_per_second=450 * GB,
                         nic_bytes_per_second=8 * 50 * GB)


FLEET = [*(_tray(i) for i in range(17)), _tray(17, four=400 * GB), _hgx(0), _hgx(1)]


def test_nodes_are_grouped_by_nvlink_domain_and_product_with_medians() -> None:
    report = t.fleet_report(FLEET)
    rack, hgx = report.classes
    assert (rack.domain, rack.product, rack.nodes, rack.gpus) == (CLIQUE, "NVIDIA GB200", 18, 72)
    assert dict(rack.medians) == {2: 716 * GB, 4: 713 * GB}
    assert (hgx.domain, hgx.nodes, dict(hgx.medians)[8]) == (None, 2, 417 * GB)
    assert rack.source == hgx.source == "estimate"


def test_an_outlier_measures_under_08_of_its_peers_median() -> None:
    report = t.fleet_report(FLEET)
    (outlier,) = report.classes[0].outliers
    assert (outlier.node, outlier.size) == ("tray-17", 4)
    assert outlier.peer_median_bytes_per_second == 713 * GB and outlier.ratio == pytest.approx(400 / 713)
    edge = [_tray(i) for i in range(4)] + [_tray(4, four=0.8 * 713 * GB)]
    assert t.fleet_report(edge).classes[0].outliers == ()  # exactly 0.8: not under it
    assert t.fleet_report([_tray(0, four=1.0)]).classes[0].outliers == ()  # no peers, no outlier
    pair = t.fleet_report([_tray(0), _tray(1, four=100 * GB)]).classes[0]
    assert [o.node for o in pair.outliers] == ["tray-01"]  # its one peer's median is the other node


def test_a_group_fits_in_one_node_when_one_holds_it() -> None:
    fits = t.fleet_report(FLEET, gpus=4).fits
    assert (fits[0].kind, fits[0].busbw_bytes_per_second, fits[0].source) == ("node", 713 * GB, "estimate")
    assert fits[0].nodes == ("tray-00",)
    assert [(f.kind, f.nodes) for f in fits] == [("node", ("tray-00",)), ("node", ("hgx-0",))]  # one per class


def test_a_larger_group_fits_across_the_trays_of_one_nvlink_domain() -> None:
    """16 GPUs: four trays of the rack over NVLink beat two HGX nodes over their NICs."""
    fits = t.fleet_report(FLEET, gpus=16).fits
    domain, network = fits[0], fits[1]
    assert (domain.kind, domain.where, len(domain.nodes)) == ("nvlink-domain", CLIQUE, 4)
    assert "tray-17" not in domain.nodes  # the degraded tray is the last one picked
    assert domain.busbw_bytes_per_second == 713 * GB and domain.limit == "the nodes' best groups"
    assert (network.kind, network.nodes, network.source) == ("network", ("hgx-0", "hgx-1"), "theoretical")
    assert network.busbw_bytes_per_second == 400 * GB and network.limit == "the NICs between nodes"
    nvlink_bound = t.fleet_report([*(_tray(i, four=800 * GB) for i in range(4))], gpus=16).fits[0]
    assert nvlink_bound.busbw_bytes_per_second == pytest.approx(720 * GB)  # NVLink 900 x 0.8
    assert (nvlink_bound.limit, nvlink_bound.source) == ("NVLink between nodes", "theoretical")


def test_a_node_without_a_figure_for_n_uses_the_next_larger_group() -> None:
    assert _hgx(0).busbw_for(3) == 358 * GB and _hgx(0).busbw_for(9) is None
    assert t.fleet_report(FLEET, gpus=100).fits == ()


def test_the_report_is_json_ready() -> None:
    doc = json.loads(json.dumps(t.fleet_report(FLEET, gpus=16).to_dict()))
    assert doc["gpus"] == 16 and doc["classes"][0]["medians"]["4"] == 713 * GB
    assert doc["classes"][0]["outliers"][0]["node"] == "tray-17" and doc["fits"][0]["kind"] == "nvlink-domain"
