"""Work at the snapshot limits grows with what the output holds, not with the pairs times the snapshot: the
first ``/metrics`` and the ``topo -m`` matrix at 8 GPUs and 1,024 NICs (the NIC limit); the pairs (GPU x NIC
classes and GPUDirect verdicts) are built once per snapshot, not once per scrape, view or sink. Counted, not
timed (benchmarks/limits.py times them)."""

from __future__ import annotations

import gc
import gzip
import importlib
from collections.abc import Callable

import pytest

import topology as t
from exporter import View, page
from exporter._metrics._exposition import MetricsCache
from exporter.kube import LabelConfig, SliceConfig, desired_devices, desired_labels
from topology.fabric import _paths
from topology.model import _entities as _memo

NICS = t.SNAPSHOT_LIMITS["nics"]


def _at_nic_limit(extra_acs: bool = False) -> t.Snapshot:
    """8 GPUs on two host bridges, each bridge a root port and a switch; 1,024 RDMA NICs under the switches."""
    link = t.PcieLinkState(current_gen=5, current_width=16, max_gen=5, max_width=16)
    bridges, pci, gpus, nics = [], [], [], []
    for d in range(2):
        hb, port, up = f"pci{d:04x}:00", f"{d:04x}:00:01.0", f"{d:04x}:10:00.0"
        bridges.append(t.HostBridge(id=hb, domain=d, bus=0, numa_node=d))
        pci += [t.PciFunction(id=port, parent=hb, vendor_id=0x8086, device_id=1, class_code=0x060400, numa_node=d),
                t.PciFunction(id=up, parent=port, vendor_id=0x10B5, device_id=2, class_code=0x060400, numa_node=d,
                              acs_enabled=extra_acs)]
        for g in range(4):
            bdf = f"{d:04x}:{0x11 + g:02x}:00.0"
            pci.append(t.PciFunction(id=bdf, parent=up, vendor_id=0x10DE, device_id=3, class_code=0x030200,
                                     numa_node=d, link=link))
            gpus.append(t.Gpu(id=bdf, index=len(gpus), minor=len(gpus), name="GPU", numa_node=d, pcie=link))
    for n in range(NICS):
        d = n % 2
        bdf = f"{d:04x}:{0x20 + n // 2 // 32:02x}:{n // 2 % 32:02x}.0"
        pci.append(t.PciFunction(id=bdf, parent=f"{d:04x}:10:00.0", vendor_id=0x15B3, device_id=4,
                                 class_code=0x020700, numa_node=d))
        nics.append(t.Nic(id=bdf, name=f"mlx5_{n}", pci_bus_id=bdf, rdma=True, numa_node=d))
    sources = tuple(t.SourceOutcome(name=s, status=t.SourceStatus.OK, duration_seconds=0.001)
                    for s in ("nvml", "pci", "infiniband"))
    return t.Snapshot(node="limit", host_bridges=tuple(bridges), pci=tuple(pci), gpus=tuple(gpus),
                      nics=tuple(nics), sources=sources, gdr=t.GdrFacts(peermem_loaded=True))


@pytest.fixture(scope="module")
def at_limit() -> t.Snapshot:
    return _at_nic_limit()


def _count_path_indexes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    built = [0]
    real = _paths.PathIndex.__init__

    def counting(self: _paths.PathIndex, snap: t.Snapshot) -> None:
        built[0] += 1
        real(self, snap)

    monkeypatch.setattr(_paths.PathIndex, "__init__", counting)
    return built


def test_the_first_metrics_read_the_snapshot_a_few_times_not_once_per_gpu_and_nic(
        at_limit: t.Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    built = _count_path_indexes(monkeypatch)
    body = gzip.decompress(MetricsCache(lambda: View(snapshot=at_limit, generation=1)).body(
        openmetrics=True, gzipped=True)).decode()
    assert built[0] <= 8, built  # was one per GPU and NIC pair (8,192 at this size) and one per GPU
    verdicts = [line for line in body.splitlines() if line.startswith("topolink_gpu_nic_gpudirect_ready{")]
    assert len(verdicts) == 8 * NICS
    ready = {line.split('"')[3] for line in verdicts if line.endswith(" 1.0") and '"0000:' in line}
    assert ready == {f"mlx5_{n}" for n in range(0, NICS, 2)}  # on the GPU's switch (PIX), peer memory on


def test_verdicts_with_the_index_are_those_without_it() -> None:
    snap = _at_nic_limit(extra_acs=True)
    index = t.PathIndex(snap)
    for g in snap.gpus[:2]:
        assert t.nearest_nics(snap, g.id, index) == t.nearest_nics(snap, g.id)
        for n in snap.nics[:: NICS // 8]:
            assert t.gdr_readiness(snap, g.id, n.id, index) == t.gdr_readiness(snap, g.id, n.id)
            assert t.gdr_readiness(snap, g.id, n.id).verdict is t.GdrVerdict.DEGRADED  # ACS on the switch


def test_the_matrix_asks_a_cell_per_pair_of_alike_devices(at_limit: t.Snapshot,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    asked = [0]
    real = _paths.PathIndex.cell

    def counting(self: _paths.PathIndex, a: str, b: str) -> str:
        asked[0] += 1
        return real(self, a, b)

    monkeypatch.setattr(_paths.PathIndex, "cell", counting)
    table = importlib.import_module("topology.render._topo_table").topo_table(at_limit)
    assert asked[0] <= 100, asked  # 8 GPUs and two groups of NICs: (8 + 2)^2 / 2 cells, not 1,032^2 / 2
    index = t.PathIndex(at_limit)
    ids = [g.id for g in t.ordered_gpus(at_limit)] + [n.id for n in t.ordered_rdma_nics(at_limit)]
    for i in range(0, len(ids), 37):  # every cell is what the pair's own path says
        for j in range(0, len(ids), 41):
            assert table.rows[i].cells[j] == ("X" if i == j else str(index.path(ids[i], ids[j])))


def test_the_pairs_are_built_once_per_snapshot_whoever_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new view around the same snapshot (a probe pass or a sink's publish makes one) is rendered again, but
    its G x N pairs are not worked out again; nor by the labels, the slices or the page on that snapshot."""
    snap = _at_nic_limit()  # a snapshot of its own: nothing derived from it is kept yet
    built = _count_path_indexes(monkeypatch)
    asked = {"pcie_class": 0, "acs_bridges": 0}  # a PCIe class; the GPUDirect verdict's walk (once per pair)
    for name in asked:
        real = getattr(_paths.PathIndex, name)

        def counting(self: _paths.PathIndex, a: str, b: str, _real: Callable[..., object] = real,
                     _name: str = name) -> object:
            asked[_name] += 1
            return _real(self, a, b)

        monkeypatch.setattr(_paths.PathIndex, name, counting)

    def scrape(generation: int) -> str:
        view = View(snapshot=snap, generation=generation)
        return gzip.decompress(MetricsCache(lambda: view).body(openmetrics=True, gzipped=True)).decode()

    first = scrape(1)
    pairs = 8 * NICS
    assert built[0] == 1 and asked["acs_bridges"] == pairs, (built, asked)  # each pair once
    once = dict(asked)
    assert scrape(2) == first
    assert asked == once, asked  # the second view's scrape: no pair worked out again
    labels = desired_labels(snap, LabelConfig(), {})
    devices = desired_devices(snap, SliceConfig())
    html = page(View(snapshot=snap, generation=3), now=0.0, svg=None, svg_reason="linked", measured_matrix="")
    assert labels["gpu.topology/gdr"] == "ready" and labels["gpu.topology/gpu-nic-path"] == "PIX"
    assert len(devices) == 8 + NICS and "mlx5_1023" in html
    assert built[0] == 1, built  # one index for the snapshot, shared by every sink
    assert asked["acs_bridges"] - once["acs_bridges"] <= 8, asked  # the labels' verdict: each GPU's nearest NIC
    # the matrix asks a cell per pair of groups (about 60), the slices and claim groups one class per GPU: never
    # a class per GPU and NIC pair again (8,192)
    assert asked["pcie_class"] - once["pcie_class"] <= 120, (asked, once)


def _ask_every_sink(view: View) -> None:
    MetricsCache(lambda: view).body(openmetrics=False, gzipped=False)
    desired_labels(view.snapshot, LabelConfig(), {})
    desired_devices(view.snapshot, SliceConfig())
    page(view, now=0.0, svg=None, svg_reason="linked", measured_matrix="")


def test_what_is_kept_for_a_snapshot_goes_with_it() -> None:
    """Nothing kept for a snapshot holds the snapshot: else every snapshot the agent served would stay."""
    snap = _at_nic_limit()
    gc.collect()  # snapshots of earlier tests that are garbage already go now, not part-way through the count
    before = _memo.kept_snapshots()
    assert t.nearest_nics(snap, snap.gpus[0].id) == t.gpu_nic_classes(snap).nearest[snap.gpus[0].id]
    _ask_every_sink(View(snapshot=snap, generation=1))
    assert _memo.kept_snapshots() == before + 1
    del snap
    gc.collect()
    assert _memo.kept_snapshots() == before
