"""Rows the metrics, the page and the picture share, computed from a snapshot (pure).

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
    Aspect,
    Fact,
    Knowledge,
    LinkKind,
    PathIndex,
    Snapshot,
    gdr_readiness,
    nearest_nics,
    nvlink_islands,
    ordered_gpus,
)

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


def _valued(snap: Snapshot, unread: Iterable[Fact] | None) -> Knowledge:
    return snap.knowledge() if unread is None else Knowledge(unread, nics=(n.id for n in snap.nics))


def gpu_rows(snap: Snapshot, unread: Iterable[Fact] | None = None) -> tuple[GpuRow, ...]:
    k = _valued(snap, unread)
    known = {g.id for g in snap.gpus if k.knows(g.id, Aspect.NVLINKS)}
    islands = nvlink_islands(snap) if len(known) == len(snap.gpus) else ()  # any unknown could join one
    island_of = {g: str(i) for i, isl in enumerate(islands) for g in isl.gpus}
    index = PathIndex(snap)
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


def gpu_pair_rows(snap: Snapshot, unread: Iterable[Fact] | None = None
                  ) -> tuple[tuple[str, str, str, int | None], ...]:
    """(gpu a, gpu b, topo -m class, NVLinks or None when unread) for each unordered pair, in index order."""
    index = PathIndex(snap)
    k = _valued(snap, unread)
    gpus = [g.id for g in ordered_gpus(snap)]
    return tuple((a, b, str(index.path(a, b)), index.nvlinks(a, b) if k.knows_all(a, Aspect.NVLINKS)
                  and k.knows_all(b, Aspect.NVLINKS) else None) for i, a in enumerate(gpus) for b in gpus[i + 1:])


def gpu_nic_rows(snap: Snapshot) -> tuple[tuple[str, str, str, bool, str], ...]:
    """(gpu, nic, PCIe class, nearest, GPUDirect verdict) for every GPU and RDMA NIC."""
    index = PathIndex(snap)
    out = []
    for g in ordered_gpus(snap):
        near = set(nearest_nics(snap, g.id))
        for n in sorted((n for n in snap.nics if n.rdma), key=lambda n: n.name):
            verdict = gdr_readiness(snap, g.id, n.id).verdict.value
            out.append((g.id, n.name, str(index.path(g.id, n.id)), n.id in near, verdict))
    return tuple(out)


def degraded(snap: Snapshot, unread: Iterable[Fact] | None = None) -> tuple[tuple[str, str, str], ...]:
    """(subject, kind, reason): NVLinks down against same-model peers, PCIe links below their width."""
    out: list[tuple[str, str, str]] = []
    k = _valued(snap, unread)
    links = nvlinks_per_gpu(snap)
    read = [g for g in ordered_gpus(snap) if not g.lost and k.knows(g.id, Aspect.NVLINKS)]
    best: dict[str, int] = {}
    for g in read:
        best[g.name or ""] = max(best.get(g.name or "", 0), links[g.id])
    for g in read:
        expected = best[g.name or ""]
        if links[g.id] < expected:
            out.append((g.id, "nvlink-down", f"{links[g.id]} of {expected} NVLinks up"))
    for f in snap.pci:
        s = f.link
        if s and s.current_width is not None and s.max_width is not None and s.current_width < s.max_width \
                and k.knows(f.id, Aspect.PCIE_LINK):
            out.append((f.id, "pcie-width", f"x{s.current_width} of x{s.max_width}"))
    return tuple(out)
