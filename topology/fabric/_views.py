"""Derived views over a snapshot: NVLink islands, NUMA affinity, nearest NICs, GPUDirect RDMA readiness."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..model._device_order import ordered_gpus
from ..model._entities import Snapshot
from ._paths import PathClass, PathIndex


@dataclass(frozen=True, slots=True, kw_only=True)
class Island:
    """GPUs joined by NVLink (directly or through NVSwitches). A GPU without NVLink is an island of one."""

    gpus: tuple[str, ...]
    min_pair_bytes_per_second: float | None  # slowest NVLink-connected pair; None for an island of one

    @property
    def size(self) -> int:
        return len(self.gpus)


def nvlink_islands(snap: Snapshot) -> tuple[Island, ...]:
    """Connected components over NVLink, largest first, GPUs in index order inside each."""
    index = PathIndex(snap)
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
    return PathIndex(snap).numa_of(gpu)


_CLASS_RANK = {c: i for i, c in enumerate(
    (PathClass.PIX, PathClass.PXB, PathClass.PHB, PathClass.NODE, PathClass.SYS))}


def nearest_nics(snap: Snapshot, gpu: str, index: PathIndex | None = None) -> tuple[str, ...]:
    """The RDMA NICs at the closest PCIe class from the GPU (ties all returned, in name order). ``index``: the
    snapshot's, where the caller asks about many GPUs."""
    index = index or PathIndex(snap)
    nics = index.rdma_nics()
    if not nics:
        return ()
    ranked = [(_CLASS_RANK[c], n.id) for n in nics if (c := index.pcie_class(gpu, n.id)) in _CLASS_RANK]
    if not ranked:
        return ()
    best = min(r for r, _ in ranked)
    return tuple(nid for r, nid in ranked if r == best)


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
    index = index or PathIndex(snap)
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

