"""The oracle: every fact a mutation changed is either unchanged or said to be unknown.

:func:`fact_values` maps each :class:`~topology.Fact` of a snapshot to its value, per the aspect table in
``topology/model/_facts.py``. A device fact's value keeps one part per kind of entity that carries the subject id
(a NIC and its PCI function share an id), so a part that vanished because its entity did is excused by
the node-wide membership fact of that kind (``gpus``, ``nics``, ``pci``): "a GPU may be missing".

:func:`diff` compares a mutated snapshot with the clean one of the same tree and returns one line per
fact that changed while the mutated snapshot claims to know it; ``topo -m`` cells are checked the same way
against the facts they derive from (NVLinks, PCIe path, NUMA of either end).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from topology import NODE, Aspect, Fact, Knowledge, LinkKind, PathIndex, Snapshot, describe_unknown

Parts = tuple[tuple[str, Any], ...]  # (entity kind, value) pairs, sorted
_MISSING = "<missing>"
_MEMBERSHIP = {"gpu": (Aspect.GPUS,), "nic": (Aspect.NICS,), "pci": (Aspect.PCI,), "host-bridge": (Aspect.PCI,),
               "nvswitch": (Aspect.PCI, Aspect.NVLINKS, Aspect.GPUS)}
_NODE_SETS = {Aspect.GPUS: "gpu", Aspect.NICS: "nic", Aspect.PCI: "pci"}
_CELL_ASPECTS = (Aspect.NVLINKS, Aspect.PCIE_PATH, Aspect.NUMA)


def _link_state(x: Any) -> Any:
    return None if x is None else (x.current_gen, x.current_width, x.max_gen, x.max_width)


def _cell(values: tuple[tuple[float, ...], ...], i: int, j: int) -> float | None:
    return values[i][j] if i < len(values) and j < len(values[i]) else None


def _pcie_chain(dev: str, parents: Mapping[str, str], bridges: set[str]) -> tuple[str, ...]:
    chain, seen = [], {dev}
    cur = parents.get(dev)
    while cur is not None and cur not in seen:
        chain.append(cur)
        seen.add(cur)
        if cur in bridges:
            break
        cur = parents.get(cur)
    return tuple(chain)


def _parts(snap: Snapshot) -> dict[Fact, dict[str, Any]]:
    out: dict[Fact, dict[str, Any]] = {}

    def put(subject: str, aspect: Aspect, kind: str, value: Any) -> None:
        out.setdefault(Fact(subject=subject, aspect=aspect), {})[kind] = value

    parents = {f.id: f.parent for f in snap.pci}
    bridges = {h.id for h in snap.host_bridges}
    for h in snap.host_bridges:
        put(h.id, Aspect.IDENTITY, "host-bridge", (h.domain, h.bus))
        put(h.id, Aspect.NUMA, "host-bridge", h.numa_node)
    for f in snap.pci:
        put(f.id, Aspect.IDENTITY, "pci", (f.vendor_id, f.device_id, f.class_code))
        put(f.id, Aspect.PCIE_PATH, "pci", _pcie_chain(f.id, parents, bridges))
        put(f.id, Aspect.PCIE_LINK, "pci", _link_state(f.link))
        put(f.id, Aspect.NUMA, "pci", (f.numa_node, f.local_cpus))
    for g in snap.gpus:
        put(g.id, Aspect.IDENTITY, "gpu", (g.index, g.minor, g.uuid, g.name, g.memory_bytes, g.pci_device_id,
                                           g.compute_capability, g.architecture, g.lost))
        put(g.id, Aspect.PCIE_LINK, "gpu", _link_state(g.pcie))
        put(g.id, Aspect.NUMA, "gpu", (g.numa_node, g.cpu_affinity, g.memory_affinity, g.gpu_numa_id))
        put(g.id, Aspect.FABRIC, "gpu", None if g.fabric is None else (g.fabric.state.value, g.fabric.cluster_uuid,
                                                                       g.fabric.clique_id))
        put(g.id, Aspect.MIG, "gpu", (g.mig_enabled, g.mig_instances))
        nvlinks = sorted((lk.b if lk.a == g.id else lk.a, lk.kind.value, lk.count, lk.nvlink_version,
                          lk.bytes_per_second) for lk in snap.links
                         if lk.kind in (LinkKind.NVLINK, LinkKind.C2C) and g.id in (lk.a, lk.b))
        put(g.id, Aspect.NVLINKS, "gpu", tuple(nvlinks))
        p2p = []
        for m in snap.matrices:
            if m.name.startswith("nvml_") and g.id in m.ids:
                k = m.ids.index(g.id)
                for j, other in enumerate(m.ids):
                    p2p.append((m.name, other, _cell(m.values, k, j), _cell(m.values, j, k)))
        put(g.id, Aspect.P2P, "gpu", tuple(p2p))
    for s in snap.nvswitches:
        put(s.id, Aspect.IDENTITY, "nvswitch", (s.pci_device_id, s.visible_on_pci))
    for n in snap.nics:
        put(n.id, Aspect.IDENTITY, "nic", (n.name, n.pci_bus_id, n.rdma, n.netdevs))
        put(n.id, Aspect.NUMA, "nic", n.numa_node)
        put(n.id, Aspect.PORTS, "nic", n.ports)
    distance = snap.matrix("numa_distance")
    put(NODE, Aspect.NUMA, "node", (tuple(sorted((x.id, x.os_index, x.cpus, x.memory_bytes, x.gpu_memory)
                                                 for x in snap.numa_nodes)),
                                    None if distance is None else (distance.ids, distance.values)))
    put(NODE, Aspect.GPUS, "node", frozenset(g.id for g in snap.gpus))
    put(NODE, Aspect.NICS, "node", frozenset(n.id for n in snap.nics))
    put(NODE, Aspect.PCI, "node", frozenset(f.id for f in snap.pci) | bridges)
    put(NODE, Aspect.GDR, "node", (snap.gdr.peermem_loaded, snap.gdr.memory_peers, snap.gdr.dmabuf_supported))
    put(NODE, Aspect.VERSIONS, "node", snap.versions)
    return out


def fact_values(snap: Snapshot) -> dict[Fact, Parts]:
    """Every fact of ``snap`` and its value: ``(entity kind, value)`` pairs, sorted by kind."""
    return {f: tuple(sorted(parts.items())) for f, parts in _parts(snap).items()}


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _present(snap: Snapshot) -> dict[str, set[str]]:
    return {"gpu": {g.id for g in snap.gpus}, "nic": {n.id for n in snap.nics}, "pci": {f.id for f in snap.pci},
            "host-bridge": {h.id for h in snap.host_bridges}, "nvswitch": {s.id for s in snap.nvswitches}}


def diff(base: Snapshot, mutated: Snapshot) -> list[str]:
    """What ``mutated`` gets wrong: each fact that differs from ``base`` while ``mutated`` says it knows it."""
    know = mutated.knowledge()
    b_parts, m_parts = _parts(base), _parts(mutated)
    b_here, m_here = _present(base), _present(mutated)
    errors: list[str] = []
    for f in sorted(set(b_parts) | set(m_parts)):
        bp, mp = b_parts.get(f, {}), m_parts.get(f, {})
        for kind in sorted(set(bp) | set(mp)):
            old, new = bp.get(kind, _MISSING), mp.get(kind, _MISSING)
            if old == new:
                continue
            if f.subject == NODE and f.aspect in _NODE_SETS:
                errors += _set_diff(f, old, new, know)
                continue
            if not know.knows(f.subject, f.aspect):
                continue
            gone = f.subject not in b_here.get(kind, ()) or f.subject not in m_here.get(kind, ())
            if gone and any(not know.knows(NODE, a) for a in _MEMBERSHIP.get(kind, ())):
                continue
            errors.append(f"{f} ({kind}) changed but is not marked unknown: {_short(old)} -> {_short(new)}")
    errors += _cell_diff(base, mutated, know)
    return errors


def _set_diff(f: Fact, old: Any, new: Any, know: Knowledge) -> list[str]:
    if not know.knows(NODE, f.aspect):
        return []
    old_set = old if isinstance(old, frozenset) else frozenset()
    new_set = new if isinstance(new, frozenset) else frozenset()
    bad = sorted(e for e in old_set ^ new_set if know.knows(e, Aspect.ALL))
    if not bad:
        return []
    lost, added = sorted(set(bad) & old_set), sorted(set(bad) & new_set)
    return [f"{f} changed but is not marked unknown (nor is all of each device): missing {lost}, new {added}"]


def _cell_diff(base: Snapshot, mutated: Snapshot, know: Knowledge) -> list[str]:
    b_ids = [g.id for g in base.gpus] + [n.id for n in base.nics if n.rdma]
    m_ids = set(g.id for g in mutated.gpus) | {n.id for n in mutated.nics if n.rdma}
    ids = [i for i in b_ids if i in m_ids]
    if not ids:
        return []
    try:
        b_index, m_index = PathIndex(base), PathIndex(mutated)
    except Exception as exc:  # the model refusing a snapshot discovery produced is a finding too
        return [f"PathIndex failed on the mutated snapshot: {exc!r}"]
    errors = []
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            old, new = str(b_index.path(a, b)), str(m_index.path(a, b))
            if old != new and all(know.knows(x, asp) for x in (a, b) for asp in _CELL_ASPECTS):
                errors.append(f"topo cell {a} x {b} changed {old} -> {new}, but nvlinks, pcie-path and numa of "
                              "both ends are marked known")
    return errors


def leaked(base: Snapshot, mutated: Snapshot, leak: Snapshot) -> list[str]:
    """Facts whose mutated value is what reading outside the tree gives (``leak``) and not the clean value."""
    b, m, x = fact_values(base), fact_values(mutated), fact_values(leak)
    know = mutated.knowledge()  # a fact marked unknown carries no value anybody may use, outside or not
    return [f"{f}: took the value from outside the tree: {_short(m[f])} (clean: {_short(b.get(f))})"
            for f in sorted(m) if f in x and m[f] == x[f] != b.get(f) and know.knows(f.subject, f.aspect)]


def unknown_not_listed(stderr: str, unknown: Iterable[Fact]) -> list[str]:
    """Each unknown aspect, and at least one of its subjects, must appear on stderr of an exit-1 run."""
    by_aspect: dict[Aspect, list[str]] = {}
    for f in unknown:
        by_aspect.setdefault(f.aspect, []).append(f.subject)
    missing = [f"{a.value} ({', '.join(sorted(s)[:3])})" for a, s in sorted(by_aspect.items())
               if a.value not in stderr or not any(x in stderr for x in s)]
    return [f"stderr does not list unknown facts: {', '.join(missing)}"] if missing else []


def describe(snap: Snapshot) -> str:
    return "; ".join(describe_unknown(snap.unknown)) or "nothing"


def text_diff(old: str, new: str, limit: int = 12) -> str:
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "clean", "mutated", lineterm="", n=0))
    shown = lines[2: 2 + limit]
    return "\n".join("      " + ln[:200] for ln in shown) + ("\n      ..." if len(lines) > 2 + limit else "")
