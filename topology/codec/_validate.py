"""``check``: a snapshot that decoded field by field may still not describe a machine. Refuse it whole.

Checked: ids unique within each kind, matrices square over unique ids, link counts and rates and
distances in range, NVLink generations and PCIe generations and widths that exist, measurement units
we know with finite non-negative values, GPU indices unique; then what the numbers and statuses mean
(``_coherence``). The first violation is raised as a
:class:`SchemaError` naming where it is, so ``topo --from`` says one clear line instead of rendering
``NV-20``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

from ..fabric._physics_rules import physical
from ..model._clock import not_ahead
from ..model._entities import LinkKind, PcieLinkState, Snapshot
from ..model._errors import SchemaError
from ..model._ids import MAX_CPUS
from ._coherence import coherent
from ._structure import structure

UNITS = ("bytes_per_second", "seconds")
MATRIX_UNITS = (*UNITS, "slit", "hops", "nvml_topology_level", "nvml_p2p_status")
_MAX_NVLINKS = 64  # per GPU pair or GPU-switch bundle; NVML_NVLINK_MAX_LINKS is 36 today
_MAX_NUMA = 4096


def _unique(what: str, ids: Iterable[str | None], field: str = ".id") -> None:
    """Each id once: ``what`` is the list's field (``snapshot.gpus``); the second holder is named."""
    seen: dict[str, int] = {}
    for n, i in enumerate(ids):
        if i is None:
            continue
        if i in seen:
            raise SchemaError(f"{what}[{n}]{field}: {i!r} appears twice (also {what}[{seen[i]}]{field})")
        seen[i] = n


def _in(where: str, value: float | None, lo: float, hi: float) -> None:
    if value is not None and not (lo <= value <= hi):
        raise SchemaError(f"{where}: {value!r} is outside {lo:g}..{hi:g}")


def _pcie_fits(s: PcieLinkState | None) -> bool:
    """``_pcie`` would pass ``s``: the usual case, in a few comparisons and no text (thousands of functions and
    links have a state; the field's name is written only for a value refused)."""
    return s is None or ((s.current_gen is None or 1 <= s.current_gen <= 8)
                         and (s.max_gen is None or 1 <= s.max_gen <= 8)
                         and (s.current_width is None or 1 <= s.current_width <= 32)
                         and (s.max_width is None or 1 <= s.max_width <= 32))


def _unfit(states: Iterable[PcieLinkState | None]) -> frozenset[int]:
    """The ids of the ``states`` that ``_pcie`` refuses, each distinct record checked once (equal states read back
    are one record: ``_decode``)."""
    distinct = {id(s): s for s in states}
    return frozenset(key for key, s in distinct.items() if not _pcie_fits(s))


def _pcie(where: str, state: PcieLinkState | None) -> None:
    if _pcie_fits(state):
        return
    assert state is not None
    for name in ("current_gen", "max_gen"):
        _in(f"{where}.{name}", getattr(state, name), 1, 8)
    for name in ("current_width", "max_width"):
        _in(f"{where}.{name}", getattr(state, name), 1, 32)


def _cpus(where: str, cpus: Iterable[int] | None) -> None:
    for c in cpus or ():
        _in(where, c, 0, MAX_CPUS - 1)


def check(snap: Snapshot, *, v1: bool = False, now: float | None = None) -> Snapshot:
    """``snap`` when it is a coherent description of one node, dated no later than ``now`` (this clock's
    time when None) allows; :class:`SchemaError` otherwise (the shape here, the meaning in ``_coherence``,
    the dates in ``_clock``)."""
    for name in ("gpus", "pci", "nics", "nvswitches", "numa_nodes", "host_bridges"):
        _unique(f"snapshot.{name}", (e.id for e in getattr(snap, name)))
    _unique("snapshot.matrices", (m.name for m in snap.matrices), ".name")
    _unique("snapshot.gpus", (None if g.index is None else str(g.index) for g in snap.gpus), ".index")
    _devices(snap)
    _links(snap)
    _numbers(snap)
    coherent(snap, v1=v1)
    k = snap.knowledge()
    physical(snap, k)
    structure(snap, k, v1=v1)
    now = time.time() if now is None else now
    not_ahead("snapshot.taken_at", snap.taken_at, now)
    for i, me in enumerate(snap.measurements):
        not_ahead(f"snapshot.measurements[{i}].taken_at", me.taken_at, now)
    return snap


def _devices(snap: Snapshot) -> None:
    """Every device's numbers in range."""
    for i, g in enumerate(snap.gpus):
        where = f"snapshot.gpus[{i}]"
        _in(f"{where}.index", g.index, 0, 1 << 16)
        _in(f"{where}.memory_bytes", g.memory_bytes, 0, 1 << 60)
        _in(f"{where}.numa_node", g.numa_node, 0, _MAX_NUMA - 1)
        _cpus(f"{where}.cpu_affinity", g.cpu_affinity)
        _pcie(f"{where}.pcie", g.pcie)
    top_cpu = MAX_CPUS - 1
    unfit = _unfit(f.link for f in snap.pci)
    for i, f in enumerate(snap.pci):
        if ((f.numa_node is None or 0 <= f.numa_node <= _MAX_NUMA - 1) and id(f.link) not in unfit
                and all(0 <= c <= top_cpu for c in f.local_cpus or ())):
            continue  # the usual case, no text built; else the checks below name the field
        _in(f"snapshot.pci[{i}].numa_node", f.numa_node, 0, _MAX_NUMA - 1)
        _cpus(f"snapshot.pci[{i}].local_cpus", f.local_cpus)
        _pcie(f"snapshot.pci[{i}].link", f.link)
    for i, n in enumerate(snap.numa_nodes):
        _in(f"snapshot.numa_nodes[{i}].os_index", n.os_index, 0, _MAX_NUMA - 1)
        _cpus(f"snapshot.numa_nodes[{i}].cpus", n.cpus)
        _in(f"snapshot.numa_nodes[{i}].memory_bytes", n.memory_bytes, 0, 1 << 62)
    for i, nic in enumerate(snap.nics):
        for j, p in enumerate(nic.ports):
            _in(f"snapshot.nics[{i}].ports[{j}].rate_gbps", p.rate_gbps, 0, 1e6)


def _links(snap: Snapshot) -> None:
    """Every link between two entities of the snapshot, its numbers in range."""
    entities = ({g.id for g in snap.gpus} | {f.id for f in snap.pci} | {n.id for n in snap.nics}
                | {s.id for s in snap.nvswitches} | {n.id for n in snap.numa_nodes} | {h.id for h in snap.host_bridges})
    unfit = _unfit(link.pcie for link in snap.links)
    for i, link in enumerate(snap.links):
        a, b, n = link.a, link.b, link.count
        if (a in entities and b in entities and a != b and 1 <= n <= (_MAX_NVLINKS if link.kind is LinkKind.NVLINK
                                                                      else 1 << 16)
                and (link.nvlink_version is None or 1 <= link.nvlink_version <= 8)
                and (link.numa_distance is None or 0 <= link.numa_distance <= 255)
                and (link.bytes_per_second is None or 0 <= link.bytes_per_second <= 1e15)
                and id(link.pcie) not in unfit):
            continue  # the usual case, no text built; else the checks below name the field
        where = f"snapshot.links[{i}]"
        for end in (link.a, link.b):
            if end not in entities:
                raise SchemaError(f"{where}: {end!r} is not a device, bridge or NUMA node of the snapshot")
        if link.a == link.b:
            raise SchemaError(f"{where}: a link from {link.a!r} to itself")
        _in(f"{where}.count", link.count, 1, _MAX_NVLINKS if link.kind is LinkKind.NVLINK else 1 << 16)
        _in(f"{where}.nvlink_version", link.nvlink_version, 1, 8)
        _in(f"{where}.numa_distance", link.numa_distance, 0, 255)
        _in(f"{where}.bytes_per_second", link.bytes_per_second, 0, 1e15)
        _pcie(f"{where}.pcie", link.pcie)


def _numbers(snap: Snapshot) -> None:
    """Matrices square and finite, measurements finite, non-negative and of a known unit."""
    for i, m in enumerate(snap.matrices):
        where = f"snapshot.matrices[{i}] ({m.name})"
        _unique(f"snapshot.matrices[{i}].ids", m.ids, "")
        if m.unit not in MATRIX_UNITS:
            raise SchemaError(f"{where}.unit: {m.unit!r} is not one of {', '.join(MATRIX_UNITS)}")
        if len(m.values) != len(m.ids) or any(len(row) != len(m.ids) for row in m.values):
            raise SchemaError(f"{where}: values are not a {len(m.ids)}x{len(m.ids)} matrix")
        if any(not math.isfinite(v) for row in m.values for v in row):
            raise SchemaError(f"{where}: a value is not a finite number")
    for i, me in enumerate(snap.measurements):
        where = f"snapshot.measurements[{i}]"
        if me.unit not in UNITS:
            raise SchemaError(f"{where}.unit: {me.unit!r} is not one of {', '.join(UNITS)}")
        if not math.isfinite(me.value) or me.value < 0:
            raise SchemaError(f"{where}.value: {me.value!r} is not a finite non-negative number")
        if not me.subjects:
            raise SchemaError(f"{where}.subjects: empty")
