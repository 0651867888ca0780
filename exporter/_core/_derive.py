"""Rows the metrics, the page and the picture share, computed from a snapshot (pure).

One rule per fact: a GPU's PCIe link is the GPU's own record (NVML where it answers, sysfs otherwise, as
discovery merged them), never its PCI function's sysfs copy; degradation is the rule the node labels and
device taints use (``exporter.kube``'s), so a metric, a label and the page never disagree.

A number without a value is ``None`` (no sample), never a guess: a GPU whose NVLinks nobody read has no
NVLink count, no island while any GPU's NVLinks are unread, and is never called degraded for links nobody
read. "Unread" is ``unread`` when given (the agent's facts no pass has read since it started; a fact read
once and unknown now keeps its last value, marked stale), else what the snapshot marks unknown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from topology import (
    NVML_TOPOLOGY_LEVEL,
    Aspect,
    Fact,
    Knowledge,
    LinkKind,
    PathClass,
    Snapshot,
    gdr_readiness,
    gpu_nic_classes,
    nvlink_islands,
    ordered_gpus,
    path_index,
    per_snapshot,
)

from ._health import degradation

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
    nvlinks: int | None  # None: the GPU's NVLinks are unknown
    pcie: tuple[PcieRow, ...]


def pcie_root(snap: Snapshot, bdf: str) -> str:
    """The host bridge (``pciDDDD:BB``) above a PCI function, or "" when the tree does not say. The map of
    parents is built once per snapshot, not once per GPU asked about (32,768 functions at the limit)."""
    parents = per_snapshot(snap, pcie_root, lambda: {f.id: f.parent for f in snap.pci})
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


def _valued(snap: Snapshot, unread: Iterable[Fact] | None) -> Knowledge:
    return snap.knowledge() if unread is None else Knowledge(unread, nics=(n.id for n in snap.nics))


def gpu_rows(snap: Snapshot, unread: Iterable[Fact] | None = None) -> tuple[GpuRow, ...]:
    k = _valued(snap, unread)
    known = {g.id for g in snap.gpus if k.knows(g.id, Aspect.NVLINKS)}
    islands = nvlink_islands(snap) if len(known) == len(snap.gpus) else ()  # any unknown could join one
    island_of = {g: str(i) for i, isl in enumerate(islands) for g in isl.gpus}
    index = path_index(snap)
    links = nvlinks_per_gpu(snap)
    rows = []
    for g in ordered_gpus(snap):
        numa = index.numa_of(g.id)
        pcie = g.pcie if k.knows(g.id, Aspect.PCIE_LINK) else None
        states: tuple[PcieRow, ...] = () if pcie is None else (
            ("current", pcie.current_gen, pcie.current_width), ("max", pcie.max_gen, pcie.max_width))
        rows.append(GpuRow(gpu=g.id, index="" if g.index is None else str(g.index), uuid=g.uuid or "",
                           name=g.name or "", pcie_root=pcie_root(snap, g.id),
                           numa_node="" if numa is None else str(numa), island=island_of.get(g.id, ""),
                           nvlinks=links[g.id] if g.id in known else None, pcie=states))
    return tuple(rows)


def _level(cls: PathClass) -> float:
    """NVML's topology level of the PCIe path (10 PIX .. 50 SYS); NaN when not known."""
    return float(NVML_TOPOLOGY_LEVEL.get(cls, float("nan")))


PairRow = tuple[str, str, str, int | None, float]


def gpu_pair_rows(snap: Snapshot, unread: Iterable[Fact] | None = None) -> tuple[PairRow, ...]:
    """(gpu a, gpu b, topo -m class, NVLinks or None when unread, PCIe level) for each unordered pair, in
    index order: G(G-1)/2 rows, built once per snapshot and ``unread``."""
    facts = None if unread is None else tuple(unread)
    return per_snapshot(snap, (gpu_pair_rows, facts), lambda: _pair_rows(snap, facts))


def _pair_rows(snap: Snapshot, unread: tuple[Fact, ...] | None) -> tuple[PairRow, ...]:
    index = path_index(snap)
    k = _valued(snap, unread)
    gpus = [g.id for g in ordered_gpus(snap)]
    return tuple((a, b, str(index.path(a, b)), index.nvlinks(a, b) if k.knows_all(a, Aspect.NVLINKS)
                  and k.knows_all(b, Aspect.NVLINKS) else None, _level(index.pcie_class(a, b)))
                 for i, a in enumerate(gpus) for b in gpus[i + 1:])


NicRow = tuple[str, str, float, bool, str]


def gpu_nic_rows(snap: Snapshot) -> tuple[NicRow, ...]:
    """(gpu, nic, PCIe level, nearest, GPUDirect verdict) for every GPU and RDMA NIC: G x N rows, built once
    per snapshot (every view around it, and so every scrape, shares them)."""
    return per_snapshot(snap, gpu_nic_rows, lambda: _nic_rows(snap))


def _nic_rows(snap: Snapshot) -> tuple[NicRow, ...]:
    index = path_index(snap)
    pairs = gpu_nic_classes(snap)
    out = []
    for g in ordered_gpus(snap):
        near = set(pairs.nearest[g.id])
        for n, cls in zip(pairs.nics, pairs.classes[g.id], strict=True):
            verdict = gdr_readiness(snap, g.id, n.id, index).verdict.value
            out.append((g.id, n.name, _level(cls), n.id in near, verdict))
    return tuple(out)


def degraded(snap: Snapshot, unread: Iterable[Fact] | None = None) -> tuple[tuple[str, str, str], ...]:
    """(subject, kind, reason): each GPU's degradations by the labels' rule, and RDMA NICs' PCIe links
    trained below their width. With what the snapshot itself marks unknown (``unread`` None), once per snapshot:
    the page asks three times (its picture, its layout, its table), each a pass over every link."""
    if unread is None:
        return per_snapshot(snap, degraded, lambda: _degraded(snap, None))
    return _degraded(snap, unread)


def _degraded(snap: Snapshot, unread: Iterable[Fact] | None) -> tuple[tuple[str, str, str], ...]:
    out: list[tuple[str, str, str]] = []
    k = _valued(snap, unread)
    links = nvlinks_per_gpu(snap)
    found = degradation(snap, k)
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
        if f is not None and s and s.current_width is not None and s.max_width is not None \
                and s.current_width < s.max_width and k.knows(f.id, Aspect.PCIE_LINK):
            out.append((n.id, "pcie-width", f"x{s.current_width} of x{s.max_width}"))
    return tuple(out)


_NEEDS = {"nvlink-down": Aspect.NVLINKS, "pcie-width": Aspect.PCIE_LINK, "pcie-slow": Aspect.PCIE_LINK}


def degraded_flags(snap: Snapshot, kinds: Iterable[str], unread: Iterable[Fact] | None = None
                   ) -> tuple[tuple[str, str, int], ...]:
    """(subject, kind, 1 or 0) for every GPU and kind, and every RDMA NIC's ``pcie-width``; nothing for a
    kind whose fact no pass has read (not known to be degraded is not known to be whole)."""
    k = _valued(snap, unread)
    bad = {(subject, kind) for subject, kind, _ in degraded(snap, unread)}
    out = [(g.id, kind, int((g.id, kind) in bad)) for g in ordered_gpus(snap) for kind in kinds
           if kind in _NEEDS and k.knows(g.id, _NEEDS[kind])]
    for n in sorted((n for n in snap.nics if n.rdma), key=lambda n: n.name):
        if k.knows(n.pci_bus_id or n.id, Aspect.PCIE_LINK):
            out.append((n.id, "pcie-width", int((n.id, "pcie-width") in bad)))
    return tuple(out)
