"""The order a snapshot's devices are listed in, by every table, picture and view: GPUs as NVML numbers them,
RDMA NICs as ibverbs names them."""

from __future__ import annotations

from ._entities import Gpu, Nic, Snapshot


def ordered_gpus(snap: Snapshot) -> tuple[Gpu, ...]:
    """NVML index order when known (NVML enumerates by PCI bus id), else bus id order."""
    return tuple(sorted(snap.gpus, key=lambda g: (g.index is None, g.index or 0, g.id)))


def ordered_rdma_nics(snap: Snapshot) -> tuple[Nic, ...]:
    """The NICs ``topo -m`` lists: RDMA devices, in ibverbs name order (mlx5_2 before mlx5_10)."""
    return tuple(sorted((n for n in snap.nics if n.rdma), key=lambda n: _natural(n.name)))


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return head, int(tail) if tail else -1
