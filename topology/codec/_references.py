"""``references``: every id a snapshot refers to is one of its own, and no PCI function is two devices.

A document whose GPU, NIC or link names a PCI function it does not list, or whose device sits on a NUMA
node it does not list, would still render: the missing function reads as "no common switch" (a ``NODE``
cell where the machine had ``PIX``), the missing NUMA node as no affinity. Discovery never writes one,
so it was edited or made elsewhere, and is refused whole. A reference whose fact a problem already leaves
unknown (a GPU NVML saw and the PCI tree did not) is not checked: that snapshot says what it lacks.

Checked, with the field named on failure:

- a PCI function's parent is a PCI function or a host bridge of the snapshot;
- a GPU, a NIC with a bus id and an NVSwitch seen on PCI are PCI functions of the snapshot (when the PCI
  tree was read);
- the NUMA node of a GPU, a NIC, a PCI function and a host bridge, and a GPU's memory affinity, are NUMA
  nodes of the snapshot (when NUMA was read);
- a matrix's ids are devices or NUMA nodes of the snapshot;
- no PCI function is two devices: GPUs, NICs and NVSwitches have distinct bus ids; no two GPUs share a
  UUID or a minor number;
- a PCIe link joins a PCI function to its parent and carries the function's link state: the ends are what
  they name and the numbers are those of the structure they describe (when its PCIe path is known).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model._entities import LinkKind, Snapshot
from ..model._errors import SchemaError
from ..model._facts import Aspect, Knowledge


def references(snap: Snapshot, k: Knowledge) -> None:
    """Raises SchemaError at the first id ``snap`` refers to and does not hold."""
    pci = {f.id for f in snap.pci}
    parents = pci | {h.id for h in snap.host_bridges}
    for i, f in enumerate(snap.pci):
        if f.parent not in parents and k.knows(f.id, Aspect.PCIE_PATH):
            raise SchemaError(f"snapshot.pci[{i}].parent: {f.parent!r} is no PCI function or host bridge of the "
                              "snapshot")
    _on_pci("gpus", ((g.id, g.id) for g in snap.gpus), pci, k)
    _on_pci("nics", ((n.id, n.pci_bus_id) for n in snap.nics), pci, k, ".pci_bus_id")
    _on_pci("nvswitches", ((s.id, s.id if s.visible_on_pci else None) for s in snap.nvswitches), pci, k)
    _distinct(snap)
    _identities(snap)
    _pcie_links(snap, k)
    numa = {n.os_index for n in snap.numa_nodes}
    _on_numa("gpus", ((g.id, (g.numa_node, *g.memory_affinity)) for g in snap.gpus), numa, k)
    _on_numa("nics", ((n.id, (n.numa_node,)) for n in snap.nics), numa, k)
    _on_numa("pci", ((f.id, (f.numa_node,)) for f in snap.pci), numa, k)
    _on_numa("host_bridges", ((h.id, (h.numa_node,)) for h in snap.host_bridges), numa, k)
    ids = (pci | {g.id for g in snap.gpus} | {n.id for n in snap.nics} | {s.id for s in snap.nvswitches}
           | {n.id for n in snap.numa_nodes} | {h.id for h in snap.host_bridges})
    for i, m in enumerate(snap.matrices):
        stray = next((x for x in m.ids if x not in ids), None)
        if stray is not None:
            raise SchemaError(f"snapshot.matrices[{i}] ({m.name}).ids: {stray!r} is no device or NUMA node of "
                              "the snapshot")


def _on_pci(what: str, refs: Iterable[tuple[str, str | None]], pci: set[str], k: Knowledge,
            field: str = ".id") -> None:
    for i, (subject, bus_id) in enumerate(refs):
        if bus_id is not None and bus_id not in pci and k.knows(subject, Aspect.PCIE_PATH):
            raise SchemaError(f"snapshot.{what}[{i}]{field}: {bus_id!r} is no PCI function of the snapshot")


def _on_numa(what: str, refs: Iterable[tuple[str, tuple[int | None, ...]]], numa: set[int],
             k: Knowledge) -> None:
    for i, (subject, nodes) in enumerate(refs):
        stray = next((n for n in nodes if n is not None and n not in numa), None)
        if stray is not None and k.knows(subject, Aspect.NUMA):
            raise SchemaError(f"snapshot.{what}[{i}]: NUMA node {stray} is not one of the snapshot")


def _distinct(snap: Snapshot) -> None:
    owner: dict[str, str] = {}
    devices = ([(f"gpus[{i}]", g.id) for i, g in enumerate(snap.gpus)]
               + [(f"nics[{i}]", n.pci_bus_id) for i, n in enumerate(snap.nics) if n.pci_bus_id is not None]
               + [(f"nvswitches[{i}]", s.id) for i, s in enumerate(snap.nvswitches)])
    for where, bus_id in devices:
        if bus_id in owner:
            raise SchemaError(f"snapshot.{where}: {bus_id!r} is also {owner[bus_id]}: one PCI function, two "
                              "devices")
        owner[bus_id] = f"snapshot.{where}"


def _identities(snap: Snapshot) -> None:
    for field in ("uuid", "minor"):
        owner: dict[object, int] = {}
        for i, g in enumerate(snap.gpus):
            value = getattr(g, field)
            if value is None:
                continue
            if value in owner:
                raise SchemaError(f"snapshot.gpus[{i}].{field}: {value!r} is also snapshot.gpus[{owner[value]}]'s: "
                                  f"one {field}, two GPUs")
            owner[value] = i


def _pcie_links(snap: Snapshot, k: Knowledge) -> None:
    funcs = {f.id: f for f in snap.pci}
    everything = not k  # nothing unknown: no fact to ask about, link by link
    for i, link in enumerate(snap.links):
        if link.kind is not LinkKind.PCIE or not (everything or k.knows(link.a, Aspect.PCIE_PATH)):
            continue
        f = funcs.get(link.a)
        if f is None:
            raise SchemaError(f"snapshot.links[{i}].a: a PCIe link from {link.a!r}, which is no PCI function")
        if link.b != f.parent:
            raise SchemaError(f"snapshot.links[{i}].b: a PCIe link from {link.a} to {link.b!r}, yet its parent is "
                              f"{f.parent!r}")
        # equal states read back are one record (``_decode``): the same one is equal in one step, no call
        if link.pcie is not f.link and link.pcie != f.link and k.knows(link.a, Aspect.PCIE_LINK):
            raise SchemaError(f"snapshot.links[{i}].pcie: {link.pcie!r} is not {link.a}'s link state {f.link!r}")
