"""NUMA nodes from ``/sys/devices/system/node``: CPUs, memory, the kernel's distance (SLIT) rows.

Kernels built without NUMA have no node directories; the machine is then one node 0 holding every
online CPU and all memory, as hwloc reports it. GPU memory that the NVIDIA driver onlined as NUMA nodes
(POWER9 + V100, Grace Hopper) is named in ``/proc/driver/nvidia/gpus/<bus id>/numa_status``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topology import BadPciAddress, Problem, canonical_bdf, parse_cpulist, parse_cpumask

from .._context import DiscoveryContext
from .._fsroot import FsRoot
from ._registry import SourceError, register
from ._sysfs import Reader

SOURCE = "numa"
_NODES = "/sys/devices/system/node"
_NODE_DIR = re.compile(r"^node(\d+)$")
_MEM_TOTAL = re.compile(r"MemTotal:\s+(\d+)\s*kB")
_DRIVER_GPUS = "/proc/driver/nvidia/gpus"


@dataclass(frozen=True, slots=True, kw_only=True)
class NumaNodeFacts:
    os_index: int
    cpus: tuple[int, ...] = ()  # as the node lists them (online and offline)
    memory_bytes: int | None = None
    distances: tuple[int, ...] | None = None  # one per node, in ascending node order (the kernel's)
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverGpuFacts:
    """A GPU the NVIDIA driver lists in /proc, with the NUMA node it onlined the GPU's memory as."""

    bus_id: str
    memory_node: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NumaFacts:
    nodes: tuple[NumaNodeFacts, ...] = ()
    online_cpus: tuple[int, ...] | None = None
    from_sysfs: bool = True  # False: no node directories, one node made up from the online CPUs
    driver_gpus: tuple[DriverGpuFacts, ...] = ()
    problems: tuple[Problem, ...] = ()


@register(SOURCE, help="NUMA nodes, their CPUs, memory and distances (/sys/devices/system/node)")
def read_numa(ctx: DiscoveryContext) -> NumaFacts:
    root = ctx.root
    problems: list[Problem] = []
    online = _online_cpus(root, problems)
    try:
        entries = root.listdir(_NODES)
    except OSError as exc:
        raise SourceError(f"{_NODES}: {exc.strerror or exc}") from exc
    indexes = sorted(int(m.group(1)) for e in entries if (m := _NODE_DIR.match(e)))
    if indexes:
        nodes = tuple(_read_node(root, i) for i in indexes)
        from_sysfs = True
    else:
        nodes = (_whole_machine(root, online, problems),)
        from_sysfs = False
    return NumaFacts(nodes=nodes, online_cpus=online, from_sysfs=from_sysfs,
                     driver_gpus=_driver_gpus(root, problems), problems=tuple(problems))


def _online_cpus(root: FsRoot, problems: list[Problem]) -> tuple[int, ...] | None:
    r = Reader(root, SOURCE, "cpus", "/sys/devices/system/cpu")
    online = r.parsed("online", parse_cpulist)
    problems.extend(r.problems)
    return online


def _read_node(root: FsRoot, index: int) -> NumaNodeFacts:
    r = Reader(root, SOURCE, f"numa{index}", f"{_NODES}/node{index}")
    cpus = r.parsed("cpulist", parse_cpulist)
    if cpus is None:
        cpus = r.parsed("cpumap", parse_cpumask, required=True)
    return NumaNodeFacts(
        os_index=index,
        cpus=cpus or (),
        memory_bytes=r.parsed("meminfo", _mem_total),
        distances=r.parsed("distance", _distances),
        problems=tuple(r.problems),
    )


def _whole_machine(root: FsRoot, online: tuple[int, ...] | None, problems: list[Problem]) -> NumaNodeFacts:
    r = Reader(root, SOURCE, "numa0", "/proc")
    cpus = online if online is not None else r.parsed("cpuinfo", _cpuinfo_processors)
    memory = r.parsed("meminfo", _mem_total)
    if cpus is None:
        raise SourceError("no NUMA nodes and no CPU list (/sys/devices/system/cpu/online, /proc/cpuinfo)")
    problems.extend(r.problems)
    return NumaNodeFacts(os_index=0, cpus=cpus, memory_bytes=memory)


def _mem_total(text: str) -> int:
    m = _MEM_TOTAL.search(text)
    if m is None:
        raise ValueError("no MemTotal")
    return int(m.group(1)) * 1024


def _distances(text: str) -> tuple[int, ...]:
    values = tuple(int(v) for v in text.split())
    if not values or any(v <= 0 for v in values):
        raise ValueError(text)
    return values


def _cpuinfo_processors(text: str) -> tuple[int, ...]:
    cpus = [int(line.split(":", 1)[1]) for line in text.splitlines() if line.startswith("processor")]
    if not cpus:
        raise ValueError("no processor lines")
    return tuple(sorted(cpus))


def _driver_gpus(root: FsRoot, problems: list[Problem]) -> tuple[DriverGpuFacts, ...]:
    try:
        names = root.listdir(_DRIVER_GPUS)
    except OSError as exc:
        problems.append(Problem(source=SOURCE, subject="nvidia", message=f"{_DRIVER_GPUS}: {exc.strerror or exc}"))
        return ()
    out = []
    for name in names:
        try:
            bdf = canonical_bdf(name)
        except BadPciAddress:
            problems.append(Problem(source=SOURCE, subject=name, message=f"{_DRIVER_GPUS}/{name}: not a PCI address"))
            continue
        r = Reader(root, SOURCE, bdf, f"{_DRIVER_GPUS}/{name}")
        node = r.parsed("numa_status", _numa_status_node)
        problems.extend(r.problems)
        out.append(DriverGpuFacts(bus_id=bdf, memory_node=node))
    return tuple(out)


def _numa_status_node(text: str) -> int | None:
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Node":
            node = int(value)
            return None if node < 0 else node
    return None
