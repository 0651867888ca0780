"""``matrix()``: the ``nvidia-smi topo -m`` table, laid out as the driver prints it (tab separated)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..fabric._paths import PathIndex, path_index
from ..model._device_order import ordered_gpus, ordered_rdma_nics
from ..model._entities import Gpu, Snapshot
from ..model._facts import Aspect
from ..model._ids import format_cpulist
from ..model._text_bounds import shown

LEGEND = """Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks"""


@dataclass(frozen=True, slots=True)
class TopoRow:
    label: str  # GPU0, NIC3
    cells: tuple[str, ...]  # one per column label, "X" on the diagonal
    cpu_affinity: str | None = None  # None on NIC rows, which have no affinity columns
    numa_affinity: str | None = None
    gpu_numa_id: str | None = None


@dataclass(frozen=True, slots=True)
class TopoTable:
    columns: tuple[str, ...]
    rows: tuple[TopoRow, ...]
    nic_legend: tuple[tuple[str, str], ...]  # (NIC0, mlx5_0)


def gpu_labels(gpus: Sequence[Gpu]) -> tuple[str, ...]:
    """Row names for ``ordered_gpus``: ``GPU<NVML index>``, as nvidia-smi names them, or ``GPU(<bus id>)``
    for a GPU NVML did not number (no driver yet, lost before it said where it is, not listed). A row's name
    is never its position in a list: no GPU can take another's number when one is missing."""
    return tuple(f"GPU{g.index}" if g.index is not None else f"GPU({g.id})" for g in gpus)


def topo_table(snap: Snapshot) -> TopoTable:
    gpus, nics = ordered_gpus(snap), ordered_rdma_nics(snap)
    labels = [*gpu_labels(gpus)] + [f"NIC{i}" for i in range(len(nics))]
    ids = [g.id for g in gpus] + [n.id for n in nics]
    index = path_index(snap)
    local_cpus = {f.id: f.local_cpus for f in snap.pci}
    rows = []
    by_id = {g.id: g for g in gpus}
    grid = _grid(index, ids)
    for label, dev, cells in zip(labels, ids, grid, strict=True):
        gpu = by_id.get(dev)
        if gpu is None:
            rows.append(TopoRow(label, cells))
            continue
        # NUMA Affinity: NVML's memory affinity, else the kernel's numa_node; N/A when neither says, as
        # nvidia-smi prints it for a device whose numa_node is -1. Unknown facts print N/A, never a guess.
        located = index.knows(gpu.id, Aspect.NUMA) and not gpu.lost
        cpus = (gpu.cpu_affinity or local_cpus.get(gpu.id) or ()) if located else ()
        numa = (gpu.memory_affinity or ((gpu.numa_node,) if gpu.numa_node is not None else ())) if located else ()
        rows.append(TopoRow(
            label, cells,
            cpu_affinity=format_cpulist(cpus) if cpus else "N/A",
            numa_affinity=format_cpulist(numa) if numa else "N/A",
            gpu_numa_id=str(gpu.gpu_numa_id) if gpu.gpu_numa_id is not None else "N/A",
        ))
    legend = tuple((f"NIC{i}", n.name) for i, n in enumerate(nics))
    return TopoTable(tuple(labels), tuple(rows), legend)


def _grid(index: PathIndex, ids: list[str]) -> list[tuple[str, ...]]:
    """Every cell, each pair of cell groups asked once (``PathIndex.cell_group``: NICs under one switch are
    alike): the work grows with the groups squared, the copying with the devices squared."""
    group_of: dict[tuple[object, ...], int] = {}
    members: list[list[str]] = []
    col = []
    for dev in ids:
        g = group_of.setdefault(index.cell_group(dev), len(members))
        if g == len(members):
            members.append([])
        members[g].append(dev)
        col.append(g)
    k = len(members)
    small = [[""] * k for _ in range(k)]
    for ga in range(k):
        a = members[ga][0]
        # two devices of one group: their cell (a path reads the same both ways)
        small[ga][ga] = index.cell(a, members[ga][1]) if len(members[ga]) > 1 else "X"
        for gb in range(ga + 1, k):
            small[ga][gb] = small[gb][ga] = index.cell(a, members[gb][0])
    grid = []
    for i, g in enumerate(col):
        cells = small[g]
        row = [cells[h] for h in col]
        row[i] = "X"
        grid.append(tuple(row))
    return grid


def _cell(value: str) -> str:
    return " X " if value == "X" else value


def matrix(snap: Snapshot, *, legend: bool = True) -> str:
    """The ``topo -m`` text: GPU and NIC rows, affinity columns on GPU rows, legend and NIC legend."""
    table = topo_table(snap)
    if not table.rows:
        return ""
    # Row names and the NIC legend may hold text from sysfs or a snapshot: escaped, bounded (``_text``).
    header = "\t" + "\t".join((*(shown(c) for c in table.columns), "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"))
    lines = [header]
    for row in table.rows:
        cells = [shown(row.label), *(_cell(c) for c in row.cells)]
        if row.cpu_affinity is not None:
            cells += [row.cpu_affinity, row.numa_affinity or "N/A", "", row.gpu_numa_id or "N/A"]
        lines.append("\t".join(cells))
    text = "\n".join(lines) + "\n"
    if legend:
        text += "\n" + LEGEND + "\n"
        if table.nic_legend:
            text += "\nNIC Legend:\n\n" + "".join(f"  {k}: {shown(v)}\n" for k, v in table.nic_legend)
    return text
