"""Derived views over a snapshot: NVLink islands, NUMA affinity, nearest NICs, GPUDirect RDMA readiness.

What grows with pairs (the PCIe class of every GPU and RDMA NIC, G x N; NVLink islands, G^2 / 2) is built
once per snapshot (``per_snapshot``) and shared by every sink that asks."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from ..model._device_order import ordered_gpus
from ..model._entities import Nic, Snapshot, per_snapshot
from ._paths import PathClass, PathIndex, path_index


@dataclass(frozen=True, slots=True, kw_only=True)
class Island:
    """GPUs joined by NVLink (directly or through NVSwitches). A GPU without NVLink is an island of one."""

    gpus: tuple[str, ...]
    min_pair_bytes_per_second: float | None  # slowest NVLink-connected pair; None for an island of one

    @property
    def size(self) -> int:
        return len(self.gpus)


def nvlink_islands(snap: Snapshot) -> tuple[Island, ...]:
    """Connected components over NVLink, largest first, GPUs in index order inside each (once per snapshot)."""
    return per_snapshot(snap, nvlink_islands, lambda: _islands(snap))


def _islands(snap: Snapshot) -> tuple[Island, ...]:
    index = path_index(snap)
    gpus = [g.id for g in ordered_gpus(snap) if not g.lost]
    parent = {g: g for g in gpus}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    pair_bw: dict[str, list[float]] = {g: [] for g in gpus}
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            if index.nvlinks(a, b):
                parent[find(a)] = find(b)
                pair_bw[a].append(index.nvlink_bandwidth(a, b))
    groups: dict[str, list[str]] = {}
    for g in gpus:
        groups.setdefault(find(g), []).append(g)
    islands = []
    for members in groups.values():
        rates = [r for g in members for r in pair_bw[g]]
        islands.append(Island(gpus=tuple(members), min_pair_bytes_per_second=min(rates) if rates else None))
    order = {g: i for i, g in enumerate(gpus)}
    return tuple(sorted(islands, key=lambda isl: (-isl.size, order[isl.gpus[0]])))


def numa_affinity(snap: Snapshot, gpu: str) -> int | None:
    """The NUMA node whose CPUs are nearest the GPU: the GPU's own, else its PCIe root's."""
    return path_index(snap).numa_of(gpu)


_CLASS_RANK = {c: i for i, c in enumerate(
    (PathClass.PIX, PathClass.PXB, PathClass.PHB, PathClass.NODE, PathClass.SYS))}


class GpuNicClasses(NamedTuple):
    """The PCIe class of every GPU and RDMA NIC pair of a snapshot."""

    nics: tuple[Nic, ...]  # the RDMA NICs in name order
    classes: Mapping[str, tuple[PathClass, ...]]  # GPU id -> its class to each of ``nics``
    nearest: Mapping[str, tuple[str, ...]]  # GPU id -> the NICs at its closest class (``nearest_nics``)


def gpu_nic_classes(snap: Snapshot) -> GpuNicClasses:
    """The class of each GPU (every one, lost ones too) to each RDMA NIC: G x N pairs, built once per snapshot
    and shared by the metrics, the labels, the slices and the page."""
    return per_snapshot(snap, gpu_nic_classes, lambda: _classes(snap))


def _classes(snap: Snapshot) -> GpuNicClasses:
    index = path_index(snap)
    nics = index.rdma_nics()
    classes = {g.id: tuple(index.pcie_class(g.id, n.id) for n in nics) for g in snap.gpus}
    return GpuNicClasses(nics, classes, {g: _nearest(nics, row) for g, row in classes.items()})


def _nearest(nics: tuple[Nic, ...], row: tuple[PathClass, ...]) -> tuple[str, ...]:
    ranked = [(_CLASS_RANK[c], n.id) for n, c in zip(nics, row, strict=True) if c in _CLASS_RANK]
    if not ranked:
        return ()
    best = min(r for r, _ in ranked)
    return tuple(nid for r, nid in ranked if r == best)


def nearest_nics(snap: Snapshot, gpu: str, index: PathIndex | None = None) -> tuple[str, ...]:
    """The RDMA NICs at the closest PCIe class from the GPU (ties all returned, in name order). A GPU of the
    snapshot's is answered from :func:`gpu_nic_classes` (once per snapshot); ``index``: the snapshot's, for
    any other id."""
    pairs = gpu_nic_classes(snap)
    if (near := pairs.nearest.get(gpu)) is not None:
        return near
    index = index or path_index(snap)
    return _nearest(pairs.nics, tuple(index.pcie_class(gpu, n.id) for n in pairs.nics))


class GdrVerdict(enum.StrEnum):
    READY = "ready"  # peer memory or dma-buf, and a PCIe path NCCL uses for GPUDirect RDMA by default
    DEGRADED = "degraded"  # would work, but through the CPU root complex or with ACS redirecting P2P
    NOT_READY = "not-ready"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class GdrReadiness:
    gpu: str
    nic: str
    verdict: GdrVerdict
    path: PathClass
    reasons: tuple[str, ...]


def gdr_readiness(snap: Snapshot, gpu: str, nic: str, index: PathIndex | None = None) -> GdrReadiness:
    """Can this NIC DMA straight into this GPU's memory, and would NCCL let it? Every reason is stated.
    ``index``: the snapshot's, where the caller asks about many pairs (each then costs no snapshot walk).

    NCCL's default GPUDirect RDMA level is PXB: it is used only when GPU and NIC share a PCIe switch.
    ACS request redirect on a bridge between them sends peer traffic up to the root complex.
    """
    index = index or path_index(snap)
    cls = index.pcie_class(gpu, nic)
    nic_rec = index.nic(nic)
    reasons: list[str] = []
    blocking = False
    if nic_rec is None or not nic_rec.rdma:
        reasons.append(f"{nic} is not an RDMA device")
        blocking = True
    gdr = snap.gdr
    peer = gdr.peermem_loaded or bool(gdr.memory_peers)
    if peer:
        how = "nvidia_peermem loaded" if gdr.peermem_loaded else "memory_peers present"
        reasons.append(f"peer memory: {how}")
    elif gdr.dmabuf_supported:
        reasons.append("dma-buf supported (no peer memory module needed)")
    elif gdr.peermem_loaded is None and gdr.dmabuf_supported is None:
        reasons.append("could not tell whether nvidia_peermem or dma-buf is available")
    else:
        reasons.append("neither nvidia_peermem nor dma-buf is available")
        blocking = True
    acs = index.acs_bridges(gpu, nic)
    degraded = False
    if acs:
        reasons.append("ACS request redirect on " + ", ".join(acs) + ": peer traffic goes through the root complex")
        degraded = True
    unknown_path = cls in (PathClass.UNKNOWN, PathClass.LOST)
    if unknown_path:
        reasons.append("the PCIe path between them is unknown" if cls is PathClass.UNKNOWN else "the GPU is lost")
    elif cls in (PathClass.PIX, PathClass.PXB):
        reasons.append(f"PCIe path {cls.value}: NCCL uses GPUDirect RDMA here by default")
    else:
        reasons.append(f"PCIe path {cls.value}: beyond NCCL's default GPUDirect RDMA level (PXB)")
        degraded = True
    if blocking:
        verdict = GdrVerdict.NOT_READY
    elif unknown_path or (not peer and not gdr.dmabuf_supported):
        verdict = GdrVerdict.UNKNOWN
    else:
        verdict = GdrVerdict.DEGRADED if degraded else GdrVerdict.READY
    return GdrReadiness(gpu=gpu, nic=nic, verdict=verdict, path=cls, reasons=tuple(reasons))

