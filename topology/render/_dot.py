"""Graphviz DOT: NUMA nodes, host bridges, PCIe switches, GPUs, NICs, NVSwitches and NVLink bundles."""

from __future__ import annotations

from ..model._device_order import ordered_gpus, ordered_rdma_nics
from ..model._entities import LinkKind, PciFunction, Snapshot
from ..model._text_bounds import shown
from ._topo_table import gpu_labels


def _q(text: str) -> str:
    """A DOT string of text already safe to show; its real newlines become DOT's centred line breaks."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n") + '"'


def _id(text: str) -> str:
    """A node's DOT name: escaped for display (``_text``) but never cut, so that two ids stay two nodes."""
    return _q(shown(text, None))


def _gbps(rate: float | None) -> str:
    return f"{rate / 1e9:g} GB/s" if rate else ""


def to_dot(snap: Snapshot) -> str:
    """One picture of the node. Bridges that lead to no GPU, NIC or NVSwitch are left out to stay legible."""
    gpus = ordered_gpus(snap)
    # Every name, id and label from sysfs, NVML or a snapshot is escaped and bounded (``_text``) before DOT's quoting.
    gpu_names = {g.id: shown(label) for g, label in zip(gpus, gpu_labels(gpus), strict=True)}
    pci = {f.id: f for f in snap.pci}
    wanted = set(gpu_names) | {n.pci_bus_id for n in snap.nics if n.pci_bus_id} | {s.id for s in snap.nvswitches}
    keep: set[str] = set()
    for bdf in wanted:
        node: PciFunction | None = pci.get(bdf)
        while node is not None and node.id not in keep:
            keep.add(node.id)
            node = pci.get(node.parent)
    lines = [f"graph {_q(shown(snap.node))} {{", "  graph [rankdir=TB, fontname=Helvetica];",
             "  node [fontname=Helvetica, shape=box];"]
    for numa in snap.numa_nodes:
        label = f"{shown(numa.id)}\ncpus {len(numa.cpus)}"
        lines.append(f"  {_id(numa.id)} [shape=ellipse, label={_q(label)}];")
    for hb in snap.host_bridges:
        if not any(pci[b].parent == hb.id for b in keep if b in pci):
            continue
        lines.append(f"  {_id(hb.id)} [shape=box, style=rounded, label={_q('HostBridge ' + shown(hb.id))}];")
        if hb.numa_node is not None:
            lines.append(f"  {_id('numa' + str(hb.numa_node))} -- {_id(hb.id)};")
    lines += _pci_lines(snap, [pci[bdf] for bdf in sorted(keep)], gpu_names)
    lines += _fabric_lines(snap, pci)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _pci_lines(snap: Snapshot, functions: list[PciFunction], gpu_names: dict[str, str]) -> list[str]:
    """The PCI functions drawn (GPUs, NICs, NVSwitches, bridges as points), each with its link up."""
    nic_names = {n.id: shown(n.name) for n in snap.nics}
    rdma = {n.id for n in ordered_rdma_nics(snap)}
    lines = []
    for f in functions:
        bdf = f.id
        if bdf in gpu_names:
            label = f"{gpu_names[bdf]}\n{shown(bdf)}"
            attrs = "style=filled, fillcolor=palegreen"
        elif any(n.pci_bus_id == bdf for n in snap.nics):
            name = ",".join(sorted(nic_names[n.id] for n in snap.nics if n.pci_bus_id == bdf))
            label = f"{name}\n{shown(bdf)}"
            attrs = "style=filled, fillcolor=lightblue" if any(
                n.pci_bus_id == bdf and n.id in rdma for n in snap.nics) else "style=filled, fillcolor=white"
        elif any(s.id == bdf for s in snap.nvswitches):
            label, attrs = f"NVSwitch\n{shown(bdf)}", "style=filled, fillcolor=khaki"
        else:
            label, attrs = f"bridge\n{shown(bdf)}", "shape=point, width=0.12"
            lines.append(f"  {_id(bdf)} [{attrs}, xlabel={_q(label)}];")
            lines.append(f"  {_id(f.parent)} -- {_id(bdf)};")
            continue
        lines.append(f"  {_id(bdf)} [label={_q(label)}, {attrs}];")
        state = f.link
        edge = f" [label={_q(f'Gen{state.current_gen} x{state.current_width}')}]" if (
            state and state.current_gen and state.current_width) else ""
        lines.append(f"  {_id(f.parent)} -- {_id(bdf)}{edge};")
    return lines


def _fabric_lines(snap: Snapshot, pci: dict[str, PciFunction]) -> list[str]:
    """NVSwitches off the PCI bus, NVLink bundles and the links between NUMA nodes."""
    lines = []
    for s in snap.nvswitches:
        if s.id not in pci:
            lines.append(f"  {_id(s.id)} [label={_q('NVSwitch fabric')}, style=filled, fillcolor=khaki];")
    for link in snap.links:
        if link.kind is LinkKind.NVLINK:
            label = f"NV{link.count}" + (f" {_gbps(link.bytes_per_second)}" if link.bytes_per_second else "")
            lines.append(f"  {_id(link.a)} -- {_id(link.b)} [color=darkgreen, penwidth=2, label={_q(label)}];")
        elif link.kind is LinkKind.NUMA and link.a < link.b:
            lines.append(f"  {_id(link.a)} -- {_id(link.b)} [style=dashed, label={_q(str(link.numa_distance))}];")
    return lines
