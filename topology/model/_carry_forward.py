"""``carry_forward``: the last known value of every fact the latest snapshot could not read.

A discovery pass that could not read a fact lists it as unknown in its problems and leaves a guess (or
nothing) in its place. The agent serves the snapshot with each such fact taken from the previous served
snapshot where that one knew it; the problems stay, so the fact is still marked unknown (stale) and a sink
keeps treating it as not freshly read. A fact the latest pass knows is never replaced.

Which fields each aspect covers (see ``_facts``): on a device, ``nvlinks`` the NVLink links touching it,
``identity`` a GPU's uuid/name/memory/minor/ids/compute capability/architecture, ``pcie-link`` a GPU's
``pcie`` and a function's ``link``, ``numa`` NUMA node and affinities, ``pcie-path`` a function's parent,
``fabric`` and ``mig`` those GPU fields, ``ports`` a NIC's ports, ``all`` the whole entity. On the node:
``gpus``/``nics`` re-add the entities that went missing, ``numa`` the NUMA nodes, their links and the
distance matrix, ``gdr``, ``versions``, and ``pci`` the PCI functions and host bridges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ._entities import Gpu, Link, LinkKind, Nic, PciFunction, Snapshot
from ._facts import NODE, Aspect, Knowledge
from ._record import replace

E = TypeVar("E", Gpu, Nic, PciFunction)

_GPU_FIELDS: dict[Aspect, tuple[str, ...]] = {
    Aspect.IDENTITY: ("uuid", "name", "memory_bytes", "minor", "pci_device_id", "compute_capability",
                      "architecture"),
    Aspect.PCIE_LINK: ("pcie",),
    Aspect.NUMA: ("numa_node", "cpu_affinity", "memory_affinity"),
    Aspect.FABRIC: ("fabric",),
    Aspect.MIG: ("mig_enabled", "mig_instances"),
}
_PCI_FIELDS: dict[Aspect, tuple[str, ...]] = {
    Aspect.PCIE_LINK: ("link",),
    Aspect.NUMA: ("numa_node", "local_cpus"),
    Aspect.PCIE_PATH: ("parent",),
}
_NIC_FIELDS: dict[Aspect, tuple[str, ...]] = {
    Aspect.PORTS: ("ports",),
    Aspect.NUMA: ("numa_node",),
}


class _Known:
    """``knows`` for one snapshot; a subject the snapshot does not hold is known by nobody in it."""

    def __init__(self, snap: Snapshot, present: Iterable[str]) -> None:
        self._k = Knowledge(snap.unknown)
        self._present = frozenset(present)

    def knows(self, subject: str, aspect: Aspect) -> bool:
        if subject != NODE and subject not in self._present:
            return False
        return self._k.knows(subject, aspect)


def _ids(snap: Snapshot) -> set[str]:
    return ({g.id for g in snap.gpus} | {n.id for n in snap.nics} | {f.id for f in snap.pci}
            | {s.id for s in snap.nvswitches})


def carry_forward(previous: Snapshot | None, current: Snapshot) -> Snapshot:
    """``current`` with each fact it marks unknown taken from ``previous`` where ``previous`` knew it."""
    if previous is None or not current.unknown:
        return current
    old = _Known(previous, _ids(previous))
    new = _Known(current, _ids(current))  # an entity re-added from previous is unknown in current

    def take(aspect: Aspect, subject: str = NODE) -> bool:
        return not new.knows(subject, aspect) and old.knows(subject, aspect)

    gpus = _readd(current.gpus, previous.gpus, take(Aspect.GPUS))
    nics = _readd(current.nics, previous.nics, take(Aspect.NICS))

    if take(Aspect.PCI):
        known_pci = {f.id for f in previous.pci}
        pci = previous.pci + tuple(f for f in current.pci if f.id not in known_pci)
        host_bridges = previous.host_bridges + tuple(h for h in current.host_bridges
                                                     if h.id not in {p.id for p in previous.host_bridges})
    else:
        pci = _each(current.pci, previous.pci, _PCI_FIELDS, take)
        host_bridges = current.host_bridges
    changes: dict[str, Any] = {
        "gpus": _each(gpus, previous.gpus, _GPU_FIELDS, take),
        "nics": _each(nics, previous.nics, _NIC_FIELDS, take),
        "pci": pci,
        "host_bridges": host_bridges,
        "nvswitches": tuple(previous_or(s, previous.nvswitches, take) for s in current.nvswitches),
    }
    links = _nvlinks(current, previous, new, old)
    if take(Aspect.NUMA):
        changes["numa_nodes"] = previous.numa_nodes
        links = tuple(lk for lk in links if lk.kind is not LinkKind.NUMA) + tuple(
            lk for lk in previous.links if lk.kind is LinkKind.NUMA)
        changes["matrices"] = tuple(m for m in current.matrices if m.name != "numa_distance") + tuple(
            m for m in previous.matrices if m.name == "numa_distance")
    changes["links"] = links
    ends = {e for lk in links for e in (lk.a, lk.b)}
    have = {s.id for s in changes["nvswitches"]}
    changes["nvswitches"] += tuple(s for s in previous.nvswitches if s.id in ends and s.id not in have)
    if take(Aspect.GDR):
        changes["gdr"] = previous.gdr
    if take(Aspect.VERSIONS):
        changes["versions"] = previous.versions
    return replace(current, **changes)


def previous_or(entity: Any, previous: tuple[Any, ...], take: Callable[[Aspect, str], bool]) -> Any:
    """The previous record of an entity whose every fact is unknown now."""
    if not take(Aspect.ALL, entity.id):
        return entity
    return next((p for p in previous if p.id == entity.id), entity)


def _readd(current: tuple[E, ...], previous: tuple[E, ...], missing_unknown: bool) -> tuple[E, ...]:
    if not missing_unknown:
        return current
    have = {e.id for e in current}
    return current + tuple(e for e in previous if e.id not in have)


def _each(current: tuple[E, ...], previous: tuple[E, ...], fields: dict[Aspect, tuple[str, ...]],
          take: Callable[[Aspect, str], bool]) -> tuple[E, ...]:
    by_id = {e.id: e for e in previous}
    out: list[E] = []
    for entity in current:
        old = by_id.get(entity.id)
        if old is None:
            out.append(entity)
            continue
        if take(Aspect.ALL, entity.id):
            out.append(old)
            continue
        changed = {name: getattr(old, name) for aspect, names in fields.items() if take(aspect, entity.id)
                   for name in names}
        out.append(replace(entity, **changed) if changed else entity)
    return tuple(out)


def _nvlinks(current: Snapshot, previous: Snapshot, new: _Known, old: _Known) -> tuple[Link, ...]:
    """A link's fact belongs to its GPU ends: it is known where any GPU end knows its NVLinks."""
    gpu_ids = {g.id for g in current.gpus} | {g.id for g in previous.gpus}

    def scope(link: Link) -> tuple[str, ...]:
        return tuple(e for e in (link.a, link.b) if e in gpu_ids)

    def known(link: Link, k: _Known) -> bool:
        return any(k.knows(e, Aspect.NVLINKS) for e in scope(link))

    kept = tuple(lk for lk in current.links if lk.kind is not LinkKind.NVLINK
                 or known(lk, new) or not known(lk, old))
    have = {lk.id for lk in kept}
    carried = tuple(lk for lk in previous.links if lk.kind is LinkKind.NVLINK and known(lk, old)
                    and not known(lk, new) and lk.id not in have)
    return kept + carried
