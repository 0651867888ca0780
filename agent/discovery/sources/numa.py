"""NUMA nodes from ``/sys/devices/system/node``: CPUs, memory, the kernel's distance (SLIT) rows.

On Linux that directory exists on every machine, one-node ones included (``node0``), so a missing,
unreadable or empty one is a failed source, never "one node holding every CPU". GPU memory that the
NVIDIA driver onlined as NUMA nodes (POWER9 + V100, Grace Hopper) is named in
``/proc/driver/nvidia/gpus/<bus id>/numa_status``. Every number is range-checked where it is parsed.
"""

from __future__ import annotations

from topology import NODE, Aspect, Problem, Record, parse_cpulist, parse_cpumask

from ..access import DiscoveryContext, FsRoot
from ._nvidia_proc import DriverGpuFacts, driver_gpus
from ._parse import MAX_NUMA_NODES, bounded, digits, one_line
from ._registry import SourceError, register
from ._sysfs import Reader, describe_os_error

SOURCE = "numa"
_NODES = "/sys/devices/system/node"
_MAX_MEMORY_KB = 1 << 50  # a petabyte-scale kB count (2**60 bytes) is already beyond any machine
_NUMA = (Aspect.NUMA,)


class NumaNodeFacts(Record):
    """One NUMA node: its CPUs, memory and distances."""

    __slots__ = __match_args__ = ("os_index", "cpus", "memory_bytes", "distances", "problems")
    os_index: int
    cpus: tuple[int, ...]  # as the node lists them (online and offline)
    memory_bytes: int | None
    distances: tuple[int, ...] | None  # one per node, in ascending node order (the kernel's)
    problems: tuple[Problem, ...]

    def __init__(self, *, os_index: int, cpus: tuple[int, ...] = (), memory_bytes: int | None = None,
                 distances: tuple[int, ...] | None = None, problems: tuple[Problem, ...] = ()) -> None:
        self._fill(locals())


class NumaFacts(Record):
    """What the numa source read."""

    __slots__ = __match_args__ = ("nodes", "online_cpus", "driver_gpus", "problems")
    nodes: tuple[NumaNodeFacts, ...]
    online_cpus: tuple[int, ...] | None
    driver_gpus: tuple[DriverGpuFacts, ...] | None  # None: the driver keeps no list here
    problems: tuple[Problem, ...]

    def __init__(self, *, nodes: tuple[NumaNodeFacts, ...] = (), online_cpus: tuple[int, ...] | None = None,
                 driver_gpus: tuple[DriverGpuFacts, ...] | None = None, problems: tuple[Problem, ...] = ()) -> None:
        self._fill(locals())


# The NVIDIA driver's GPU list under /proc names GPUs too (one whose vendor file is unreadable).
@register(SOURCE, covers=(Aspect.NUMA, Aspect.GPUS),
          help="NUMA nodes, their CPUs, memory and distances (/sys/devices/system/node)")
def read_numa(ctx: DiscoveryContext) -> NumaFacts:
    root = ctx.root
    problems: list[Problem] = []
    online = _online_cpus(root, problems)
    if not root.is_dir(_NODES):
        raise SourceError(f"{_NODES} is missing: every Linux kernel has it, so NUMA placement is unknown")
    try:
        entries = root.listdir(_NODES)
    except OSError as exc:
        raise SourceError(f"{_NODES}: {describe_os_error(exc)}") from exc
    indexes = sorted(i for i in map(node_index, entries) if i is not None)
    indexes = [i for i in indexes if i < MAX_NUMA_NODES]
    if not indexes:
        raise SourceError(f"{_NODES} lists no node: NUMA placement is unknown")
    nodes = tuple(_read_node(root, i) for i in indexes)
    return NumaFacts(nodes=nodes, online_cpus=online,
                     driver_gpus=driver_gpus(root, problems), problems=tuple(problems))


def _online_cpus(root: FsRoot, problems: list[Problem]) -> tuple[int, ...] | None:
    r = Reader(root, SOURCE, "cpus", "/sys/devices/system/cpu", fact_subject=NODE)
    online = r.parsed("online", parse_cpulist, _NUMA)
    problems.extend(r.problems)
    return online


def _read_node(root: FsRoot, index: int) -> NumaNodeFacts:
    r = Reader(root, SOURCE, f"numa{index}", f"{_NODES}/node{index}", fact_subject=NODE)
    cpus = r.parsed("cpulist", parse_cpulist, _NUMA)
    if cpus is None:
        cpus = r.parsed("cpumap", parse_cpumask, _NUMA, required=True)
    return NumaNodeFacts(
        os_index=index,
        cpus=cpus or (),
        memory_bytes=r.parsed("meminfo", _mem_total, _NUMA, required=True),
        distances=r.parsed("distance", _distances, _NUMA, required=True),
        problems=tuple(r.problems),
    )


def node_index(entry: str) -> int | None:
    """A node's directory (``node([0-9]{1,5})``): its index, else None."""
    line = one_line(entry)
    return int(line[4:]) if line.startswith("node") and digits(line[4:], 1, 5) else None


def _mem_total_kb(text: str) -> str:
    """The first ``MemTotal:\\s+([0-9]{1,16})\\s*kB`` of a node's meminfo: its number of kB."""
    at = text.find("MemTotal:")
    while at >= 0:
        after = text[at + 9:]
        number = after.lstrip()
        rest = number.lstrip("0123456789")
        if len(number) < len(after) and 1 <= len(number) - len(rest) <= 16 and rest.lstrip().startswith("kB"):
            return number[:len(number) - len(rest)]
        at = text.find("MemTotal:", at + 1)
    raise ValueError("no MemTotal")


def _mem_total(text: str) -> int:
    kb = int(_mem_total_kb(text))
    if kb > _MAX_MEMORY_KB:
        raise ValueError(f"MemTotal {kb} kB")
    return kb * 1024


_SLIT = bounded(1, 255)  # ACPI SLIT entries are one byte: 10 local, 255 unreachable


def _distances(text: str) -> tuple[int, ...]:
    parts = text.split()
    if not parts or len(parts) > MAX_NUMA_NODES:
        raise ValueError(text[:60])
    return tuple(_SLIT(v) for v in parts)
