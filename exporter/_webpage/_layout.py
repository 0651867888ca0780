"""The node drawn for people in HTML (no script, no image): GPUs grouped by socket, then by the PCIe switch
(or root complex) they hang from, each GPU tile banded with the colour of its NVLink island.

Made to stay readable from one GPU to 72: boxes wrap like words, a GPU is a tile of fixed size with its
index large and its bus id, PCIe link and NVLinks small, and the NVLink domains are a legend above rather
than a thicket of edges. NICs and PCI-visible NVSwitches sit in the group of the switch they hang from.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from html import escape

from topology import CostModel, Gpu, Snapshot, nvlink_islands, ordered_gpus, pcie_switch, shown

from .._core._derive import degraded, nvlinks_per_gpu

ISLAND_COLOURS = ("#2e7d32", "#1565c0", "#ad1457", "#ef6c00", "#6a1b9a", "#00838f", "#9e9d24", "#4e342e")
UNKNOWN_SOCKET = 1 << 30

CSS = """.topo{display:flex;flex-wrap:wrap;gap:10px;align-items:flex-start}
.sock{border:2px solid #888;border-radius:6px;padding:4px 6px 6px;background:#fafafa}
.sock>h3{font-size:.85em;margin:0 0 4px;color:#333}.grp{display:flex;flex-wrap:wrap;gap:6px}
.sw{border:1px dashed #999;border-radius:4px;padding:3px 4px 4px;background:#fff}
.sw>div.h{font-size:.7em;color:#555;margin-bottom:3px;white-space:nowrap}.tiles{display:flex;flex-wrap:wrap;gap:4px}
.gpu{width:118px;border:1px solid #666;border-left:8px solid #bbb;border-radius:3px;padding:2px 4px;
background:#eef7ee;font-size:.68em;line-height:1.25}.gpu b{font-size:1.45em;display:block}
.gpu.bad{border-color:#c00;background:#fde8e8}.gpu.lost{background:#ddd;color:#666}
.nic,.nvs{width:70px;border:1px solid #6a8;border-radius:3px;padding:2px 4px;background:#e8f1fb;font-size:.66em}
.nvs{background:#fff6d6;border-color:#b9a}.legend{font-size:.8em;margin:.3em 0 .6em}
.legend span.k{display:inline-block;width:14px;height:10px;margin:0 3px 0 10px;vertical-align:middle}"""


def _gbs(v: float | None) -> str:
    return "?" if v is None else f"{v / 1e9:.0f} GB/s"


def _islands(snap: Snapshot) -> tuple[dict[str, int], list[str]]:
    """GPU -> index of its island (islands of two or more), and one legend line per such island."""
    member: dict[str, int] = {}
    legend: list[str] = []
    switches = {s.id for s in snap.nvswitches}
    reach: dict[str, set[str]] = defaultdict(set)  # GPU -> the NVSwitches it reaches
    for lk in snap.links:
        if lk.kind.value == "nvlink" and {lk.a, lk.b} & switches:
            reach[lk.a if lk.b in switches else lk.b].add(lk.b if lk.b in switches else lk.a)
    for i, isl in enumerate(x for x in nvlink_islands(snap) if x.size > 1):
        for g in isl.gpus:
            member[g] = i
        colour = ISLAND_COLOURS[i % len(ISLAND_COLOURS)]
        through = set().union(*(reach[g] for g in isl.gpus))
        how = f"through {len(through)} NVSwitch{'es' if len(through) > 1 else ''}" if through else "direct NVLinks"
        legend.append(f'<span class="k" style="background:{colour}"></span>NVLink island {chr(65 + i % 26)}: '
                      f"{isl.size} GPUs, {how}, slowest pair {_gbs(isl.min_pair_bytes_per_second)} (theoretical)")
    return member, legend


def _gpu_tile(g: Gpu, island: int | None, nvlinks: int, bad: str) -> str:
    colour = ISLAND_COLOURS[island % len(ISLAND_COLOURS)] if island is not None else "#bbb"
    cls = "gpu lost" if g.lost else "gpu bad" if bad else "gpu"
    p = g.pcie
    link = f"Gen{p.current_gen or '?'} x{p.current_width or '?'}" if p else "PCIe ?"
    nv = "no NVLink" if not nvlinks else f"NV{nvlinks}" + \
        (f" &middot; {chr(65 + island % 26)}" if island is not None else "")
    state = "LOST" if g.lost else "MIG" if g.mig_enabled else escape(bad)
    title = escape(f"GPU{g.index} {shown(g.id)} {shown(g.name or '')} {shown(g.uuid or '')}".strip())
    return (f'<div class="{cls}" style="border-left-color:{colour}" title="{title}"><b>GPU{g.index}</b>'
            f"{escape(shown(g.id))}<br>{link} &middot; {nv}" + (f"<br>{state}" if state else "") + "</div>")


# socket -> PCIe switch (or root complex) -> the tiles below it, in the order they are drawn
_Groups = dict[int, dict[str, list[str]]]


def node_picture(snap: Snapshot) -> str:
    """The HTML fragment (with its own ``<style>``)."""
    gpus = ordered_gpus(snap)
    if not gpus:
        return "<p>No GPU on this node.</p>"
    model = CostModel(snap)
    island, legend = _islands(snap)
    groups, socket_of = _gpu_groups(snap, gpus, model, island)
    _add_nics_and_switches(snap, gpus, model, groups, socket_of)
    numa: dict[int, set[int]] = defaultdict(set)
    for g in gpus:
        if g.numa_node is not None:
            numa[model.locality_key(g.id)[0]].add(g.numa_node)
    return _html(groups, numa, legend)


def _gpu_groups(snap: Snapshot, gpus: Sequence[Gpu], model: CostModel,
                island: dict[str, int]) -> tuple[_Groups, dict[str, int]]:
    """The GPU tiles by socket and PCIe switch, and the socket of each root complex that holds a GPU."""
    links = nvlinks_per_gpu(snap)
    bad: dict[str, str] = defaultdict(str)
    for subject, kind, _ in degraded(snap):
        bad[subject] = f"{bad[subject]} {kind}".strip()
    socket_of: dict[str, int] = {}
    groups: _Groups = defaultdict(lambda: defaultdict(list))
    for g in gpus:
        socket, root, _, _ = model.locality_key(g.id)
        socket_of[root] = socket
        groups[socket][pcie_switch(snap, g.id) or root or "unknown"].append(_gpu_tile(g, island.get(g.id),
                                                                                     links[g.id], bad[g.id]))
    return groups, socket_of


def _add_nics_and_switches(snap: Snapshot, gpus: Sequence[Gpu], model: CostModel, groups: _Groups,
                           socket_of: dict[str, int]) -> None:
    """RDMA NICs and NVSwitches beside the GPUs of their PCIe switch; one under a switch without GPUs goes
    to the socket of its root complex, or of its host bridge's NUMA node."""
    root_of = {f.id: f.parent for f in snap.pci}
    others = [(n.pci_bus_id,
               f'<div class="nic" title="{escape(shown(n.id))}">{escape(shown(n.name))}<br>NIC</div>')
              for n in snap.nics if n.rdma and n.pci_bus_id]
    others += [(s.id, f'<div class="nvs" title="{escape(shown(s.id))}">NVSwitch<br>{escape(shown(s.id[5:]))}</div>')
               for s in snap.nvswitches if s.visible_on_pci and s.id in root_of]
    numa_socket = {g.numa_node: model.locality_key(g.id)[0] for g in gpus if g.numa_node is not None}
    bridge_numa = {h.id: h.numa_node for h in snap.host_bridges}
    for bdf, tile in others:
        switch = pcie_switch(snap, bdf)
        home = next((s for s, by in groups.items() if switch in by), None)
        if home is None:
            root = _root(root_of, bdf) or ""
            near = bridge_numa.get(root)
            home = socket_of.get(root, numa_socket.get(near) if near is not None else None)
        if home is not None and switch is not None:
            groups[home][switch].append(tile)


def _html(groups: _Groups, numa: dict[int, set[int]], legend: list[str]) -> str:
    parts = [f"<style>{CSS}</style>"]
    if legend:
        parts.append('<div class="legend">' + "<br>".join(legend) + "</div>")
    parts.append('<div class="topo">')
    for socket in sorted(groups):
        nodes = ", ".join(f"NUMA {n}" for n in sorted(numa[socket]))
        name = "socket unknown" if socket == UNKNOWN_SOCKET else f"socket {socket}"
        parts.append(f'<div class="sock"><h3>{name}' + (f" &middot; {nodes}" if nodes else "")
                     + '</h3><div class="grp">')
        by_switch = groups[socket]
        if all(len(tiles) == 1 and switch.startswith("pci") for switch, tiles in by_switch.items()):
            # every device on a root complex of its own (GB200, most PCIe boxes): one box says so for all
            by_switch = {"each on its own root complex": [t for tiles in by_switch.values() for t in tiles]}
        for switch, tiles in by_switch.items():
            head = switch if switch.startswith("each") else \
                f"root complex {switch}" if switch.startswith("pci") else f"PCIe switch {switch}"
            parts.append(f'<div class="sw"><div class="h">{escape(shown(head))}</div><div class="tiles">'
                         + "".join(tiles) + "</div></div>")
        parts.append("</div></div>")
    parts.append("</div>")
    return "\n".join(parts)


def _root(parents: dict[str, str], bdf: str) -> str | None:
    node, seen = bdf, set()
    while node in parents and node not in seen:
        seen.add(node)
        node = parents[node]
    return node if node.startswith("pci") else None
