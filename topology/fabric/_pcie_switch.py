"""``pcie_switch``: the PCIe switch a device hangs from, the grouping a scheduler and a picture use;
``pcie_switches``: every switch above it, nearest first (two levels of switches: pairs under leaves, quads
under the switch above them).

A switch is an upstream port and its downstream ports; in the walk from a device up to its root complex,
the root port is at depth 0 and switches' upstream ports at odd depths (as ``_paths`` counts them for
``topo -m``). The device's switch is the nearest upstream port above it; a device right under a root port
has none, and its root complex stands in (devices under one root complex meet at the host bridge, ``PHB``).
"""

from __future__ import annotations

from ..model._entities import Snapshot, per_snapshot


def _tree(snap: Snapshot) -> tuple[dict[str, str], frozenset[str]]:
    """Each PCI function's parent, and the root complexes: built once per snapshot, not once per device asked
    about (a page or a picture asks for every GPU and NIC; a snapshot may hold 32,768 functions)."""
    return per_snapshot(snap, _tree, lambda: ({f.id: f.parent for f in snap.pci},
                                              frozenset(h.id for h in snap.host_bridges)))


def pcie_switches(snap: Snapshot, device: str) -> tuple[str, ...]:
    """The bus ids of the upstream ports of every PCIe switch above ``device``, nearest first (a machine with
    two levels of switches: the leaf, then the one above it); () under a root port, or when the chain of
    parents does not reach a root complex."""
    nearest = pcie_switch(snap, device)
    if nearest is None or nearest.startswith("pci"):
        return ()
    parents, roots = _tree(snap)
    ups: list[str] = []
    node = device
    while (parent := parents.get(node)) is not None and parent not in roots and parent not in ups:
        ups.append(parent)
        node = parent
    return tuple(port for k, port in enumerate(ups) if (len(ups) - 1 - k) % 2 == 1)


def pcie_switch(snap: Snapshot, device: str) -> str | None:
    """The bus id of the upstream port of the nearest PCIe switch above ``device`` (a PCI function's bus
    id), else its root complex (``pciDDDD:BB``); None when the chain of parents does not reach one."""
    parents, roots = _tree(snap)
    ups: list[str] = []
    node, seen = device, {device}
    while True:
        parent = parents.get(node)
        if parent is None or parent in seen:
            return None
        if parent in roots:
            break
        ups.append(parent)
        seen.add(parent)
        node = parent
    for k, port in enumerate(ups):
        if (len(ups) - 1 - k) % 2 == 1:
            return port
    return parent
