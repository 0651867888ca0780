"""``assemble``: every source's facts into one sysfs-only :class:`topology.Snapshot`. Pure.

Identity is the PCI bus id: GPUs found here carry ``index=None`` and are enriched by bus id when NVML
facts are merged later (``Gpu.id`` is the canonical bus id whoever reported the device). Everything comes
out sorted, so the same facts always give the same snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable

from topology import (
    Aspect,
    GdrFacts,
    Link,
    LinkKind,
    Matrix,
    MatrixKind,
    NumaNode,
    PciFunction,
    Problem,
    Snapshot,
    node_fact,
    numa_id,
    pcie_bytes_per_second,
)

from ..sources._parse import bdf_key
from ..sources._registry import Gathered
from ..sources.gdr import GdrHostFacts
from ..sources.infiniband import InfinibandFacts
from ..sources.net import NetFacts
from ..sources.numa import NumaFacts
from ..sources.pci import PciFacts
from . import _nic, _pci
from ._pci import NumaPlaces
from ._witness import witness

NUMA_DISTANCE = "numa_distance"


def assemble(gathered: Gathered, *, node: str, taken_at: float | None) -> Snapshot:
    pci = gathered.get("pci", PciFacts) or PciFacts()
    numa = gathered.get("numa", NumaFacts)
    ib = gathered.get("infiniband", InfinibandFacts) or InfinibandFacts()
    net = gathered.get("net", NetFacts) or NetFacts()
    gdr = gathered.get("gdr", GdrHostFacts)
    problems: list[Problem] = [*gathered.problems, *pci.problems, *ib.problems, *net.problems]
    problems += [p for d in pci.devices for p in d.problems]
    problems += [p for d in ib.devices for p in d.problems]
    problems += [p for i in net.interfaces for p in i.problems]
    problems += [witness("pci-bus-id").dispute((bdf,), dirs[0], dirs[1]) for bdf, dirs in pci.twins]

    numa_nodes, matrices = _numa(numa, problems)
    places = NumaPlaces(frozenset(n.os_index for n in numa_nodes) if numa else None)
    devices = sorted(pci.devices, key=lambda d: bdf_key(d.bus_id))
    funcs = _pci.functions(devices, places, problems)
    _pci.unrooted(funcs, {d.host_bridge for d in devices if d.placed}, problems)
    driver_gpus = {g.bus_id: g for g in numa.driver_gpus or ()} if numa else {}
    gpus = _pci.gpus(funcs, driver_gpus, problems)
    nics = _nic.nics(ib.devices, net.interfaces, funcs, problems)

    host_bridges = _pci.host_bridges(devices, funcs)
    roots = {h.id for h in host_bridges}
    links = [*_numa_links(matrices), *_pcie_links([g.id for g in gpus], funcs, roots)]
    links += _pcie_links([n.pci_bus_id for n in nics if n.pci_bus_id], funcs, roots)
    gdr_facts = _gdr(gdr, problems)
    return Snapshot(
        node=node,
        taken_at=taken_at,
        host_bridges=host_bridges,
        pci=tuple(funcs.values()),
        numa_nodes=numa_nodes,
        gpus=gpus,
        nvswitches=_pci.nvswitches(funcs),
        nics=nics,
        links=tuple(sorted(links, key=lambda link: link.id)),
        matrices=matrices,
        gdr=gdr_facts,
        sources=tuple(sorted(gathered.outcomes, key=lambda o: o.name)),
        problems=tuple(sorted(set(problems), key=lambda p: (p.source, p.subject, p.message))),
    )


def _numa(facts: NumaFacts | None, problems: list[Problem]) -> tuple[tuple[NumaNode, ...], tuple[Matrix, ...]]:
    if facts is None:
        return (), ()
    problems += facts.problems
    online = set(facts.online_cpus) if facts.online_cpus is not None else None
    gpu_memory = {g.memory_node for g in facts.driver_gpus or () if g.memory_node is not None}
    nodes = []
    for n in facts.nodes:
        problems += n.problems
        cpus = n.cpus if online is None else tuple(c for c in n.cpus if c in online)
        nodes.append(NumaNode(id=numa_id(n.os_index), os_index=n.os_index, cpus=cpus, memory_bytes=n.memory_bytes,
                              gpu_memory=n.os_index in gpu_memory))
    ordered = tuple(sorted(nodes, key=lambda n: n.os_index))
    return ordered, _distance_matrix(facts, problems)


def _distance_matrix(facts: NumaFacts, problems: list[Problem]) -> tuple[Matrix, ...]:
    rows = [n.distances for n in sorted(facts.nodes, key=lambda n: n.os_index)]
    size = len(rows)
    if any(r is None for r in rows):
        return ()  # the unreadable row is a problem already
    if any(len(r or ()) != size for r in rows):
        problems.append(Problem(source="numa", subject=NUMA_DISTANCE,
                                message=f"distance rows do not form a {size}x{size} matrix",
                                unknown=(node_fact(Aspect.NUMA),)))
        return ()
    return (Matrix(
        name=NUMA_DISTANCE,
        kind=MatrixKind.FROM_OS | MatrixKind.LATENCY,
        unit="slit",
        ids=tuple(numa_id(n.os_index) for n in sorted(facts.nodes, key=lambda n: n.os_index)),
        values=tuple(tuple(float(v) for v in r or ()) for r in rows),
    ),)


def _numa_links(matrices: Iterable[Matrix]) -> list[Link]:
    """One link per pair of NUMA nodes, carrying the distance from the lower-numbered node's row."""
    out = []
    for m in matrices:
        if m.name != NUMA_DISTANCE:
            continue
        for i, a in enumerate(m.ids):
            for j in range(i + 1, len(m.ids)):
                out.append(Link(a=a, b=m.ids[j], kind=LinkKind.NUMA, numa_distance=int(m.values[i][j])))
    return out


def _pcie_links(bdfs: Iterable[str], funcs: dict[str, PciFunction], roots: set[str]) -> list[Link]:
    """Each GPU's and NIC's link to its upstream bridge or root complex, at its current gen and width
    (none for a device whose upstream end is not known)."""
    out = []
    for bdf in bdfs:
        f = funcs.get(bdf)
        if f is None or (f.parent not in funcs and f.parent not in roots):
            continue
        rate = pcie_bytes_per_second(f.link.current_gen, f.link.current_width) if f.link else None
        out.append(Link(a=bdf, b=f.parent, kind=LinkKind.PCIE, pcie=f.link, bytes_per_second=rate))
    return out


def _gdr(facts: GdrHostFacts | None, problems: list[Problem]) -> GdrFacts:
    if facts is None:
        return GdrFacts()
    problems += facts.problems
    return GdrFacts(peermem_loaded=facts.peermem_loaded, memory_peers=facts.memory_peers,
                    dmabuf_supported=dmabuf_supported(facts))


def dmabuf_supported(facts: GdrHostFacts) -> bool | None:
    """GPU memory exported as dma-buf for RDMA needs NVIDIA's open kernel modules on Linux 5.12 or newer
    (the proprietary modules never export it). No NVIDIA driver loaded: no."""
    if facts.nvidia_loaded is False:
        return False
    if facts.nvidia_open_module is None:
        return None
    if not facts.nvidia_open_module:
        return False
    return None if facts.kernel_version is None else facts.kernel_version >= (5, 12)
