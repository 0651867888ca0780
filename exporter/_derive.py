"""Rows the metrics, the page and the picture share, computed from a snapshot (pure).

One rule per fact: a GPU's PCIe link is the GPU's own record (NVML where it answers, sysfs otherwise, as
discovery merged them), never its PCI function's sysfs copy; degradation is the rule the node labels and
device taints use (``exporter.kube``'s), so a metric, a label and the page never disagree.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from topology import (
    NVML_TOPOLOGY_LEVEL,
    LinkKind,
    PathIndex,
    Snapshot,
    gdr_readiness,
    nearest_nics,
    nvlink_islands,
    ordered_gpus,
)

from .kube._health import degradation

PcieRow = tuple[str, int | None, int | None]  # (state, generation, width)


@dataclass(frozen=True, slots=True)
class GpuRow:
    gpu: str
    index: str
    uuid: str
    name: str
    pcie_root: str
    numa_node: str
    island: str
    nvlinks: int
    pcie: tuple[PcieRow, ...]


def pcie_root(snap: Snapshot, bdf: str) -> str:
    """The host bridge (``pciDDDD:BB``) above a PCI function, or "" when the tree does not say."""
    parents = {f.id: f.parent for f in snap.pci}
    seen: set[str] = set()
    node = bdf
    while node in parents and node not in seen:
        seen.add(node)
        node = parents[node]
    return node if node.startswith("pci") else ""


def nvlinks_per_gpu(snap: Snapshot) -> Counter[str]:
    out: Counter[str] = Counter()
    for link in snap.links:
        if link.kind is LinkKind.NVLINK:
            out[link.a] += link.count
            out[link.b] += link.count
    return out


def gpu_rows(snap: Snapshot) -> tuple[GpuRow, ...]:
    island_of = {g: str(i) for i, isl in enumerate(nvlink_islands(snap)) for g in isl.gpus}
    index = PathIndex(snap)
    links = nvlinks_per_gpu(snap)
    rows = []
    for g in ordered_gpus(snap):
        numa = index.numa_of(g.id)
        pcie = g.pcie
        states: tuple[PcieRow, ...] = () if pcie is None else (
            ("current", pcie.current_gen, pcie.current_width), ("max", pcie.max_gen, pcie.max_width))
        rows.append(GpuRow(gpu=g.id, index="" if g.index is None else str(g.index), uuid=g.uuid or "",
                           name=g.name or "", pcie_root=pcie_root(snap, g.id),
                           numa_node="" if numa is None else str(numa), island=island_of.get(g.id, ""),
                           nvlinks=links[g.id], pcie=states))
    return tuple(rows)


def _level(index: PathIndex, a: str, b: str) -> float:
    """NVML's topology level of the PCIe path (10 PIX .. 50 SYS); NaN when not known."""
    return float(NVML_TOPOLOGY_LEVEL.get(index.pcie_class(a, b), float("nan")))


def gpu_pair_rows(snap: Snapshot) -> tuple[tuple[str, str, str, int, float], ...]:
    """(gpu a, gpu b, topo -m class, NVLinks, PCIe level) for each unordered pair, in index order."""
    index = PathIndex(snap)
    gpus = [g.id for g in ordered_gpus(snap)]
    return tuple((a, b, str(index.path(a, b)), index.nvlinks(a, b), _level(index, a, b))
                 for i, a in enumerate(gpus) for b in gpus[i + 1:])


def gpu_nic_rows(snap: Snapshot) -> tuple[tuple[str, str, float, bool, str], ...]:
    """(gpu, nic, PCIe level, nearest, GPUDirect verdict) for every GPU and RDMA NIC."""
    index = PathIndex(snap)
    out = []
    for g in ordered_gpus(snap):
        near = set(nearest_nics(snap, g.id))
        for n in sorted((n for n in snap.nics if n.rdma), key=lambda n: n.name):
            verdict = gdr_readiness(snap, g.id, n.id).verdict.value
            out.append((g.id, n.name, _level(index, g.id, n.id), n.id in near, verdict))
    return tuple(out)


def degraded(snap: Snapshot) -> tuple[tuple[str, str, str], ...]:
    """(subject, kind, reason): each GPU's degradations by the labels' rule, and RDMA NICs' PCIe links
    trained below their width."""
    out: list[tuple[str, str, str]] = []
    links = nvlinks_per_gpu(snap)
    found = degradation(snap)
    for g in ordered_gpus(snap):
        p = g.pcie
        for kind in found.get(g.id, ()):
            if kind == "nvlink-down":
                why = f"{links[g.id]} NVLinks up, fewer than a peer of the same model"
            elif kind == "pcie-width" and p is not None:
                why = f"x{p.current_width} of x{p.max_width}"
            elif kind == "pcie-slow" and p is not None:
                why = f"Gen{p.current_gen} of Gen{p.max_gen}, and host copies run slow"
            else:
                why = kind
            out.append((g.id, kind, why))
    funcs = {f.id: f for f in snap.pci}
    for n in sorted((n for n in snap.nics if n.rdma and n.pci_bus_id), key=lambda n: n.name):
        f = funcs.get(n.pci_bus_id or "")
        s = f.link if f is not None else None
        if s and s.current_width is not None and s.max_width is not None and s.current_width < s.max_width:
            out.append((n.id, "pcie-width", f"x{s.current_width} of x{s.max_width}"))
    return tuple(out)
