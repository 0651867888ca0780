"""Which facts of a snapshot are known: the completeness signal every sink acts on.

A :class:`Fact` is one aspect of one subject: ``Fact(subject="0000:18:00.0", aspect=Aspect.NVLINKS)`` is
"the NVLinks of that GPU". Node-wide facts have the subject :data:`NODE`. Each :class:`~topology.Problem`
lists the facts it leaves unknown; a problem that lists none is a note (something odd was seen and fully
accounted for). A node-wide fact being unknown makes the matching fact of every device unknown too
(:data:`IMPLIED_BY`): when the PCI source fails, no device's PCIe path is known.

What each aspect covers, and who needs it:

============  =====================================================================  =====================
aspect        subject: what is unknown                                               needed by
============  =====================================================================  =====================
all           a device: everything about it (a lost GPU, a v1 problem)               everything
gpus          node: which GPUs exist (a GPU may be missing from the snapshot)        rows, counts, labels
nics          node: which NICs / RDMA devices exist                                  rows, counts, labels
pci           node: the PCIe tree as a whole                                         every PCIe class
numa          node: NUMA nodes, their CPUs, memory and distances                     NODE/SYS, affinity
nvlinks       node: NVLinks of every GPU; a GPU: its NVLinks (count, peers, gen)     NV#, islands
gdr           node: nvidia_peermem, memory peers, dma-buf                            GPUDirect readiness
versions      node: driver, NVML and CUDA driver versions                            info metrics, labels
identity      a device: uuid, name, memory, minor, ids, compute capability           info, labels
pcie-path     a device: its place in the PCIe tree (parents, root complex)           PIX/PXB/PHB/NODE/SYS
pcie-link     a device: PCIe generation and width, current and maximum               degradation, rates
numa          a device: its NUMA node and CPU / memory affinity                      NODE/SYS, affinity
p2p           a GPU: NVML's P2P status and common ancestor with its peers            P2P matrices, probes
fabric        a GPU: fabric state, cluster UUID and clique                           clique labels
mig           a GPU: MIG mode and instances                                          MIG labels
ports         a NIC: port state, rate and link layer                                 NIC metrics, labels
============  =====================================================================  =====================

Facts that need privileges (ACS on bridges without root) are optional: they are ``None`` when not read
and are never problems.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from ._record import Record
from ._text_bounds import shown

NODE = "node"


class Aspect(enum.StrEnum):
    ALL = "all"
    GPUS = "gpus"
    NICS = "nics"
    PCI = "pci"
    NUMA = "numa"
    NVLINKS = "nvlinks"
    GDR = "gdr"
    VERSIONS = "versions"
    IDENTITY = "identity"
    PCIE_PATH = "pcie-path"
    PCIE_LINK = "pcie-link"
    P2P = "p2p"
    FABRIC = "fabric"
    MIG = "mig"
    PORTS = "ports"


class Fact(Record):
    """One fact of a snapshot: an aspect of a subject (an entity id, or the whole node)."""

    __slots__ = __match_args__ = ("subject", "aspect")
    subject: str  # an entity id, or NODE
    aspect: Aspect

    def __init__(self, *, subject: str, aspect: Aspect) -> None:
        self._fill(locals())

    def __lt__(self, other: Fact) -> bool:
        return self._values().__lt__(other._values())

    def __le__(self, other: Fact) -> bool:
        return self._values().__le__(other._values())

    def __gt__(self, other: Fact) -> bool:
        return self._values().__gt__(other._values())

    def __ge__(self, other: Fact) -> bool:
        return self._values().__ge__(other._values())

    def __str__(self) -> str:
        return f"{self.aspect.value} of {self.subject}"


# A device's aspect is unknown when the node-wide aspect it derives from is.
IMPLIED_BY: dict[Aspect, tuple[Aspect, ...]] = {
    Aspect.PCIE_PATH: (Aspect.PCI,),
    Aspect.PCIE_LINK: (Aspect.PCI,),
    Aspect.NUMA: (Aspect.NUMA, Aspect.PCI),
    Aspect.NVLINKS: (Aspect.NVLINKS,),
    Aspect.P2P: (Aspect.NVLINKS,),
    Aspect.IDENTITY: (),
    Aspect.FABRIC: (),
    Aspect.MIG: (),
    Aspect.PORTS: (Aspect.NICS,),
}


def fact(subject: str, aspect: Aspect) -> Fact:
    return Fact(subject=subject, aspect=aspect)


def node_fact(aspect: Aspect) -> Fact:
    return Fact(subject=NODE, aspect=aspect)


def facts_of(subject: str, *aspects: Aspect) -> tuple[Fact, ...]:
    return tuple(Fact(subject=subject, aspect=a) for a in aspects)


class Knowledge:
    """Answers "is this fact known?" for one set of unknown facts, with the node-wide implications."""

    __slots__ = ("_nics", "_node_all", "_unknown")

    def __init__(self, unknown: Iterable[Fact], *, nics: Iterable[str] = ()) -> None:
        self._unknown = frozenset(unknown)
        self._node_all = node_fact(Aspect.ALL) in self._unknown
        self._nics = frozenset(nics)  # their identity (name, RDMA, netdevs) follows the NIC inventory

    @property
    def unknown(self) -> frozenset[Fact]:
        return self._unknown

    def __bool__(self) -> bool:
        """True when something is unknown."""
        return bool(self._unknown)

    def knows(self, subject: str, aspect: Aspect) -> bool:
        if not self._unknown:
            return True
        if self._node_all:
            return False
        u = self._unknown
        if Fact(subject=subject, aspect=aspect) in u or Fact(subject=subject, aspect=Aspect.ALL) in u:
            return False
        if subject == NODE:
            return True
        implied = IMPLIED_BY.get(aspect, ())
        if aspect is Aspect.IDENTITY and subject in self._nics:
            implied = (Aspect.NICS,)
        return not any(Fact(subject=NODE, aspect=a) in u for a in implied)

    def knows_all(self, subject: str, *aspects: Aspect) -> bool:
        return all(self.knows(subject, a) for a in aspects)


def describe_unknown(unknown: Iterable[Fact]) -> list[str]:
    """One line per aspect: ``nvlinks: 0000:18:00.0, 0000:2a:00.0``, node-wide ones first."""
    by_aspect: dict[Aspect, list[str]] = {}
    for f in sorted(set(unknown)):
        by_aspect.setdefault(f.aspect, []).append(shown(f.subject))  # a subject may come from a snapshot
    lines = []
    for aspect in sorted(by_aspect, key=lambda a: (NODE not in by_aspect[a], a.value)):
        subjects = by_aspect[aspect]
        listed = ", ".join(subjects[:8]) + (f" and {len(subjects) - 8} more" if len(subjects) > 8 else "")
        lines.append(f"{aspect.value}: {listed}")
    return lines
