"""Cross-checks: two readings of one fact that cannot both be true. Pure.

  Invariant: a fact is known only if a source read it and no cross-check disputes it. When two witnesses
  contradict each other, neither side is picked: the contradiction is a problem naming the facts it
  leaves unknown (a sink keeps their last known values), and the snapshot is not complete.

Each check names what is genuinely impossible on a working machine, not what is merely unusual; every one
stays silent on the real machines' trees in tests/data/hwloc and on the machine profiles (a test checks):

==========================  ==========================================================  =====================
check                       contradiction                                               unknown
==========================  ==========================================================  =====================
numa cpus                   one CPU listed by two NUMA nodes (the kernel gives each     node numa
                            CPU exactly one node)
numa distances              a node's distance to itself other than 10, or to another    node numa
                            node 10 or less (the kernel refuses such a SLIT)
root complex numa           two functions under one root complex in different NUMA      numa of the root
                            nodes (the kernel gives a bus's devices its node; -1, "not  complex and of each
                            known", beside a node is normal and no contradiction)       function under it
pcie link over max          a link trained faster or wider than the device's maximum    pcie-link
nvml ancestor               NVML's common ancestor of two GPUs against the PCIe class   pcie-path, numa, p2p
                            the sysfs tree gives (NVML's 0, same board, counts as PIX)  of both GPUs
nvml p2p over nvlink        NVML says two GPUs do P2P over NVLink, yet the NVLinks      nvlinks of both GPUs
                            read join them by none (a link state NVML would not give,
                            taken as "no NVLink on this GPU")
rdma without infiniband     Mellanox functions bound to mlx5_core/mlx4_core while       node nics (which NICs
                            /sys/class/infiniband is missing (RDMA stack not loaded,    have RDMA)
                            or not visible), or an InfiniBand-class one with no RDMA
                            device: RDMA readiness is unknown, not "no"
==========================  ==========================================================  =====================
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from topology import (
    NVML_TOPOLOGY_LEVEL,
    Aspect,
    PathClass,
    PathIndex,
    Problem,
    Snapshot,
    SourceStatus,
    facts_of,
    node_fact,
)
from topology import _record as dataclasses  # replace() for records, without loading dataclasses

_MELLANOX = 0x15B3
_RDMA_DRIVERS = ("mlx5_core", "mlx4_core")
_CLASS_INFINIBAND = 0x0207
_LEVEL_CLASS = {level: cls for cls, level in NVML_TOPOLOGY_LEVEL.items()} | {0: PathClass.PIX}
_NUMA_DISTANCE = "numa_distance"
_PATH_FACTS = (Aspect.PCIE_PATH, Aspect.NUMA, Aspect.P2P)  # the common ancestor itself is a P2P-aspect fact


def _numa_cpus(snap: Snapshot) -> list[Problem]:
    owner: dict[int, str] = {}
    for n in snap.numa_nodes:
        for cpu in n.cpus:
            if cpu in owner:
                return [Problem(source="numa", subject=f"{owner[cpu]},{n.id}", message=f"CPU {cpu} is listed by "
                                f"both {owner[cpu]} and {n.id}: which node each CPU is in is unknown",
                                unknown=(node_fact(Aspect.NUMA),))]
            owner[cpu] = n.id
    return []


def _numa_distances(snap: Snapshot) -> list[Problem]:
    m = snap.matrix(_NUMA_DISTANCE)
    if m is None:
        return []
    for i, row in enumerate(m.values):
        for j, d in enumerate(row):
            if (i == j and d != 10) or (i != j and d <= 10):
                return [Problem(source="numa", subject=_NUMA_DISTANCE, message=f"distance from {m.ids[i]} to "
                                f"{m.ids[j]} is {d:g}, yet a node is 10 from itself and farther from any other: "
                                "the distances are unknown", unknown=(node_fact(Aspect.NUMA),))]
    return []


def _root_numa(snap: Snapshot) -> list[Problem]:
    pci = {f.id: f for f in snap.pci}
    roots = {h.id for h in snap.host_bridges}
    under: dict[str, list[str]] = defaultdict(list)
    for f in snap.pci:
        cur, seen = f.parent, {f.id}
        while cur in pci and cur not in seen:
            seen.add(cur)
            cur = pci[cur].parent
        if cur in roots and f.numa_node is not None:
            under[cur].append(f.id)
    out = []
    for root, ids in sorted(under.items()):
        nodes = sorted({n for i in ids if (n := pci[i].numa_node) is not None})
        if len(nodes) > 1:
            unknown = tuple(f for i in (root, *ids) for f in facts_of(i, Aspect.NUMA))
            out.append(Problem(source="pci", subject=root, message=f"functions under {root} say NUMA nodes "
                               f"{', '.join(map(str, nodes))}, yet a root complex is in one node: the NUMA node of "
                               "each is unknown", unknown=unknown))
    return out


def _link_over_max(snap: Snapshot) -> list[Problem]:
    out = []
    for f in snap.pci:
        link = f.link
        if link is None:
            continue
        for what, cur, top in (("generation", link.current_gen, link.max_gen),
                               ("width", link.current_width, link.max_width)):
            if cur is not None and top is not None and cur > top:
                out.append(Problem(source="pci", subject=f.id, message=f"PCIe link {what} {cur} is above the "
                                   f"device's maximum {top}: its link state is unknown",
                                   unknown=facts_of(f.id, Aspect.PCIE_LINK)))
                break
    return out


def _nvml_ancestor(snap: Snapshot) -> list[Problem]:
    m = snap.matrix("nvml_common_ancestor")
    if m is None:
        return []
    index = PathIndex(snap)
    out = []
    for i, a in enumerate(m.ids):
        for j in range(i + 1, len(m.ids)):
            b, level = m.ids[j], int(m.values[i][j])
            said = _LEVEL_CLASS.get(level)
            if said is None:
                continue  # not read (-1), or a level nvidia-smi does not print: nothing to compare
            seen = index.pcie_class(a, b)
            if seen in (PathClass.UNKNOWN, PathClass.LOST) or seen is said:
                continue
            out.append(Problem(source="nvml", subject=f"{a}--{b}", message=f"NVML's common ancestor says "
                               f"{said.value}, the PCIe tree in sysfs says {seen.value}: the path between them is "
                               "unknown", unknown=(*facts_of(a, *_PATH_FACTS), *facts_of(b, *_PATH_FACTS))))
    return out


def _p2p_without_nvlink(snap: Snapshot) -> list[Problem]:
    m = snap.matrix("nvml_p2p_nvlink")
    if m is None:
        return []
    k = snap.knowledge()
    index = PathIndex(snap)
    out = []
    for i, a in enumerate(m.ids):
        for j in range(i + 1, len(m.ids)):
            b = m.ids[j]
            if m.values[i][j] != 0 or index.nvlinks(a, b) or not (k.knows(a, Aspect.NVLINKS)
                                                                  and k.knows(b, Aspect.NVLINKS)):
                continue
            out.append(Problem(source="nvml", subject=f"{a}--{b}", message="NVML says these GPUs do P2P over "
                               "NVLink, yet the NVLinks read join them by none: their NVLinks are unknown",
                               unknown=(*facts_of(a, Aspect.NVLINKS), *facts_of(b, Aspect.NVLINKS))))
    return out


def _rdma_without_infiniband(snap: Snapshot) -> list[Problem]:
    ib = next((o for o in snap.sources if o.name == "infiniband"), None)
    if ib is None or ib.status is SourceStatus.DISABLED:
        return []
    bound = [f for f in snap.pci if f.vendor_id == _MELLANOX and f.driver in _RDMA_DRIVERS]
    rdma = {n.pci_bus_id for n in snap.nics if n.rdma}
    if ib.status is SourceStatus.ABSENT:
        odd = bound
    else:
        odd = [f for f in bound if f.class_code >> 8 == _CLASS_INFINIBAND and f.id not in rdma]
    if not odd:
        return []
    where = "/sys/class/infiniband is missing" if ib.status is SourceStatus.ABSENT else "no RDMA device names them"
    return [Problem(source="infiniband", subject=",".join(f.id for f in odd), message=f"{len(odd)} Mellanox "
                    f"function(s) bound to {odd[0].driver} but {where}: whether they do RDMA is unknown (the RDMA "
                    "stack may still be loading)", unknown=(node_fact(Aspect.NICS),))]


CHECKS: tuple[Callable[[Snapshot], list[Problem]], ...] = (
    _numa_cpus, _numa_distances, _root_numa, _link_over_max, _nvml_ancestor, _p2p_without_nvlink,
    _rdma_without_infiniband)


def cross_check(snap: Snapshot) -> Snapshot:
    """``snap`` with a problem for every contradiction between its sources' readings."""
    found = [p for check in CHECKS for p in check(snap)]
    if not found:
        return snap
    sources = snap.sources
    rdma = next((p for p in found if p.source == "infiniband"), None)
    if rdma is not None:  # "absent" was a reading the PCI bus contradicts
        sources = tuple(dataclasses.replace(o, status=SourceStatus.FAILED, detail=rdma.message)
                        if o.name == "infiniband" and o.status is SourceStatus.ABSENT else o for o in sources)
    problems = sorted({*snap.problems, *found}, key=lambda p: (p.source, p.subject, p.message))
    return dataclasses.replace(snap, sources=sources, problems=tuple(problems))

