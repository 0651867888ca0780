"""``path(a, b)``: the ``nvidia-smi topo -m`` class between two GPUs or NICs.

The PCIe classes count PCIe *switches* (the legend's "bridges"), not bridge functions: a switch is one
upstream port plus its downstream ports, so two GPUs on one switch are PIX although the walk between
them passes three bridge functions. In a chain of bridges from the root port down, upstream and
downstream ports alternate, so the switch of a downstream port is its parent.

- ``X``: the same device.
- ``NV#``: GPUs joined by # bonded NVLinks, direct ones plus, through NVSwitches, the links each GPU
  has to the switches (the smaller of the two counts).
- ``PIX``: at most one switch (or one root port) between them.
- ``PXB``: several switches, below a common bridge.
- ``PHB``: the same host bridge, no common bridge below it.
- ``NODE``: different host bridges in one NUMA node. ``SYS``: across NUMA nodes, or where either device
  has no NUMA node (the kernel's ``numa_node`` is -1), as nvidia-smi prints it.
- ``N/A``: a fact the class depends on is unknown (the snapshot's problems say which): the PCIe path or
  NUMA node of either device, or for two GPUs the NVLinks of either. ``LOST``: either GPU fell off the bus.
  A guess never stands in: an NVLink whose far end could not be read is not "no NVLink".
"""

from __future__ import annotations

import enum
from collections import defaultdict
from typing import NamedTuple

from ..model._entities import LinkKind, Nic, Snapshot, per_snapshot
from ..model._facts import Aspect


class PathClass(enum.StrEnum):
    SELF = "X"
    NVLINK = "NV"
    PIX = "PIX"
    PXB = "PXB"
    PHB = "PHB"
    NODE = "NODE"
    SYS = "SYS"
    UNKNOWN = "N/A"
    LOST = "LOST"


# NVML's nvmlGpuTopologyLevel_t for each PCIe class (INTERNAL 0 is reported as PIX by nvidia-smi).
NVML_TOPOLOGY_LEVEL = {
    PathClass.PIX: 10,
    PathClass.PXB: 20,
    PathClass.PHB: 30,
    PathClass.NODE: 40,
    PathClass.SYS: 50,
}


class PathInfo(NamedTuple):
    """The class of a path, and for NVLink its link count and the PCIe class beneath."""

    kind: PathClass
    nvlinks: int = 0
    pcie: PathClass | None = None  # the PCIe class underneath an NVLink path

    def __str__(self) -> str:
        return f"NV{self.nvlinks}" if self.kind is PathClass.NVLINK else self.kind.value


class _Place(NamedTuple):
    """Where a device sits under the host bridges."""

    root: str | None  # host bridge id, None when unknown
    chain: tuple[str, ...]  # bridge functions from the root port down, the device excluded
    numa: int | None


class PathIndex:
    """Lookups built once per snapshot; ``path`` over a whole matrix is then cheap. Building one reads the whole
    snapshot: :func:`path_index` gives the snapshot's own, built once and shared by whoever asks (the metrics,
    the labels, the slices, the page)."""

    def __init__(self, snap: Snapshot) -> None:
        self._knowledge = snap.knowledge()
        self._lost = {g.id for g in snap.gpus if g.lost}
        self._pci = {f.id: f for f in snap.pci}
        self._acs = any(f.acs_enabled for f in snap.pci)  # no bridge redirects peer traffic: no walk per pair
        self._roots = {h.id: h for h in snap.host_bridges}
        self._nic_pci = {n.id: n.pci_bus_id for n in snap.nics}
        self._nics = {n.id: n for n in snap.nics}
        self._rdma: tuple[Nic, ...] | None = None
        self._all_nics = snap.nics  # never the snapshot: the index is kept with it (``path_index``), not keeping it
        self._gpus = {g.id for g in snap.gpus}
        self._numa_of = {g.id: g.numa_node for g in snap.gpus} | {n.id: n.numa_node for n in snap.nics}
        switches = {s.id for s in snap.nvswitches}
        self._direct: dict[frozenset[str], int] = defaultdict(int)
        self._direct_bw: dict[frozenset[str], float] = defaultdict(float)
        self._to_switch: dict[str, int] = defaultdict(int)
        self._to_switch_bw: dict[str, float] = defaultdict(float)
        for link in snap.links:
            if link.kind is not LinkKind.NVLINK:
                continue
            rate = link.bytes_per_second or 0.0
            if link.a in self._gpus and link.b in self._gpus:
                self._direct[frozenset((link.a, link.b))] += link.count
                self._direct_bw[frozenset((link.a, link.b))] += rate
            elif link.b in switches and link.a in self._gpus:
                self._to_switch[link.a] += link.count
                self._to_switch_bw[link.a] += rate
            elif link.a in switches and link.b in self._gpus:
                self._to_switch[link.b] += link.count
                self._to_switch_bw[link.b] += rate
        self._places: dict[str, _Place] = {}
        self._distinct: dict[_Place, _Place] = {}
        # The class below a common host bridge depends on the two places alone: a matrix of every GPU and
        # NIC (G + N squared cells) works it out once per pair of distinct places (a few per switch).
        self._below_root: dict[tuple[int, int], PathClass] = {}
        self._all_known = not self._knowledge

    def nvlinks(self, a: str, b: str) -> int:
        direct = self._direct.get(frozenset((a, b)), 0) if self._direct else 0
        via_switch = min(self._to_switch.get(a, 0), self._to_switch.get(b, 0))
        return direct + via_switch

    def nvlink_bandwidth(self, a: str, b: str) -> float:
        """Theoretical NVLink bytes/s per direction between two GPUs (0 when not NVLink-connected)."""
        direct = self._direct_bw.get(frozenset((a, b)), 0.0)
        return direct + min(self._to_switch_bw.get(a, 0.0), self._to_switch_bw.get(b, 0.0))

    def numa_of(self, dev: str) -> int | None:
        return self._place(dev).numa

    def _place(self, dev: str) -> _Place:
        if dev in self._places:
            return self._places[dev]
        bdf = self._nic_pci.get(dev, dev)
        chain: list[str] = []
        root: str | None = None
        node = self._pci.get(bdf) if bdf else None
        numa = node.numa_node if node else None
        seen: set[str] = set()
        while node is not None and node.id not in seen:
            seen.add(node.id)
            parent = node.parent
            if parent in self._roots:
                root = parent
                break
            node = self._pci.get(parent)
            if node is not None:
                chain.append(node.id)
        chain.reverse()
        if numa is None:
            numa = self._numa_of.get(dev)
        if numa is None and root is not None:
            numa = self._roots[root].numa_node
        place = _Place(root, tuple(chain), numa)
        place = self._distinct.setdefault(place, place)  # devices under one switch share one place
        self._places[dev] = place
        return place

    def nic(self, nic: str) -> Nic | None:
        """The NIC of this id, or None."""
        return self._nics.get(nic)

    def rdma_nics(self) -> tuple[Nic, ...]:
        """The RDMA NICs in name order (the order every GPU/NIC table lists them in)."""
        if self._rdma is None:
            self._rdma = tuple(sorted((n for n in self._all_nics if n.rdma), key=lambda n: n.name))
        return self._rdma

    def acs_bridges(self, gpu: str, nic: str) -> tuple[str, ...]:
        """The bridges with ACS request redirect on that peer traffic between the GPU and the NIC crosses: those
        below their deepest common bridge on either side, and that bridge."""
        if not self._acs:
            return ()
        nic_bdf = self._nic_pci.get(nic) or nic
        a, b = self._bridges_above(gpu), self._bridges_above(nic_bdf)
        shared = set(a) & set(b)
        between = [x for x in a if x not in shared] + [x for x in b if x not in shared]
        if shared:  # the deepest common bridge routes the peer traffic too
            between.append(next(x for x in a if x in shared))
        return tuple(sorted(x for x in between if self._pci[x].acs_enabled))

    def _bridges_above(self, bdf: str) -> list[str]:
        """The PCI functions above ``bdf``, nearest first, up to the host bridge."""
        out: list[str] = []
        node = self._pci.get(bdf)
        while node is not None and node.parent in self._pci and node.parent not in out:
            out.append(node.parent)
            node = self._pci.get(node.parent)
        return out

    def knows(self, dev: str, aspect: Aspect) -> bool:
        return self._knowledge.knows(dev, aspect)

    def pcie_class(self, a: str, b: str) -> PathClass:
        if self._lost and (a in self._lost or b in self._lost):
            return PathClass.LOST
        k, known = self._knowledge, self._all_known
        if not (known or (k.knows(a, Aspect.PCIE_PATH) and k.knows(b, Aspect.PCIE_PATH))):
            return PathClass.UNKNOWN
        pa, pb = self._places.get(a) or self._place(a), self._places.get(b) or self._place(b)
        if pa.root is None or pb.root is None or pa.root != pb.root:
            if not (known or (k.knows(a, Aspect.NUMA) and k.knows(b, Aspect.NUMA))):
                return PathClass.UNKNOWN
            # nvidia-smi prints SYS when it cannot place a device in a NUMA node
            same_node = pa.numa is not None and pa.numa == pb.numa
            return PathClass.NODE if same_node else PathClass.SYS
        key = (id(pa), id(pb))  # places are kept (``_places``) and distinct: an id names one
        cls = self._below_root.get(key)
        if cls is None:
            cls = self._below_root[key] = _class_below_root(pa, pb)
        return cls

    def path(self, a: str, b: str) -> PathInfo:
        if a == b:
            return PathInfo(PathClass.SELF)
        pcie = self.pcie_class(a, b)
        if pcie is PathClass.LOST:
            return PathInfo(pcie)
        if a in self._gpus and b in self._gpus:
            if not (self._knowledge.knows(a, Aspect.NVLINKS) and self._knowledge.knows(b, Aspect.NVLINKS)):
                return PathInfo(PathClass.UNKNOWN)
            count = self.nvlinks(a, b)
            if count:
                return PathInfo(PathClass.NVLINK, count, pcie)
        return PathInfo(pcie)

    def cell_group(self, dev: str) -> tuple[object, ...]:
        """Devices of one group have the same ``cell`` with every other device: a GPU is a group of its own
        (its NVLinks), any other device is grouped by its place under the host bridges and what is known of
        its path and NUMA node. A matrix of every GPU and NIC works out a cell per pair of groups."""
        if dev in self._gpus:
            return ("gpu", dev)
        k = self._knowledge
        return (id(self._place(dev)), k.knows(dev, Aspect.PCIE_PATH), k.knows(dev, Aspect.NUMA))

    def cell(self, a: str, b: str) -> str:
        """``str(path(a, b))``, as the matrix asks it for every pair of its rows: no PathInfo is built."""
        if a == b:
            return "X"
        pcie = self.pcie_class(a, b)
        if pcie is not PathClass.LOST and a in self._gpus and b in self._gpus:
            k = self._knowledge
            if not (self._all_known or (k.knows(a, Aspect.NVLINKS) and k.knows(b, Aspect.NVLINKS))):
                return "N/A"
            count = self.nvlinks(a, b)
            if count:
                return f"NV{count}"
        return _TEXT[pcie]


_TEXT = {c: c.value for c in PathClass}


def _class_below_root(pa: _Place, pb: _Place) -> PathClass:
    """PIX, PXB or PHB between two places under one host bridge."""
    common = 0
    for x, y in zip(pa.chain, pb.chain, strict=False):
        if x != y:
            break
        common += 1
    if common == 0:
        return PathClass.PHB
    # The walk touches the deepest common bridge and every bridge below it on both sides.
    walked = {(i, pa.chain[i]) for i in range(common - 1, len(pa.chain))}
    walked |= {(i, pb.chain[i]) for i in range(common - 1, len(pb.chain))}
    switches = {_switch_of(pa.chain if bdf in pa.chain else pb.chain, i) for i, bdf in walked}
    return PathClass.PIX if len(switches) <= 1 else PathClass.PXB


def _switch_of(chain: tuple[str, ...], depth: int) -> str:
    """Depth 0 is the root port (a switch of its own); odd depths are upstream ports."""
    if depth == 0 or depth % 2 == 1:
        return chain[depth]
    return chain[depth - 1]


def path_index(snap: Snapshot) -> PathIndex:
    """The snapshot's :class:`PathIndex`, built on the first request and kept while the snapshot lives."""
    return per_snapshot(snap, PathIndex, lambda: PathIndex(snap))


def path(snap: Snapshot, a: str, b: str) -> PathInfo:
    """The class of the connection between two GPUs/NICs (ids), as ``nvidia-smi topo -m`` prints it."""
    return path_index(snap).path(a, b)
