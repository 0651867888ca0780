"""The picture of the node: Graphviz DOT (pure) and its SVG through ``dot`` with a time limit.

As lstopo draws it: NUMA nodes, host bridges, PCIe switches, GPUs, NICs and NVSwitches. PCIe edges say
generation and width, NVLink edges the link count; an edge is as wide as its bandwidth (measured where
there is a measurement, else theoretical), and degraded hardware is drawn red.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from dataclasses import dataclass

from topology import LinkKind, PciFunction, Snapshot, Source, gpu_labels, ordered_gpus, pcie_bytes_per_second, shown

from .._core._derive import degraded


def _q(text: str) -> str:
    """A DOT string of text already safe to show (names and ids through ``topology.shown``)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _id(text: str) -> str:
    """A node's DOT name: escaped for display but never cut, so that two ids stay two nodes."""
    return _q(shown(text, None))


def _pen(rate: float | None) -> str:
    """Edge width from bytes per second: 1 at 1 GB/s or less, about 7 at 1 TB/s."""
    if not rate or rate <= 1e9:
        return "1"
    return f"{1 + 2 * math.log10(rate / 1e9):.1f}"


def _measured(snap: Snapshot) -> dict[frozenset[str], float]:
    """The best measured bandwidth per pair of endpoints, per direction."""
    out: dict[frozenset[str], float] = {}
    for m in snap.measurements:
        if m.source is Source.MEASURED and m.unit == "bytes_per_second" and len(m.subjects) == 2 \
                and m.direction in ("a->b", "b->a"):
            key = frozenset(m.subjects)
            out[key] = max(out.get(key, 0.0), m.value)
    return out


# NUMA distances are a complete graph: n nodes make n(n-1)/2 edges, and Graphviz's time grows much faster
# than the edges (a GB200 tray's 34 NUMA nodes, 2 with CPUs and 32 of GPU memory, took 9 s to 55 s). Drawn
# are the distances between the NUMA nodes with CPUs (where a job's threads run), at most this many nodes;
# the rest are in the snapshot (/v1/topology) and the picture says so.
MAX_DISTANCE_NODES = 8


def _distances_drawn(snap: Snapshot) -> tuple[set[str], str]:
    """The NUMA nodes whose distances are drawn, and the note the picture carries for those left out."""
    with_cpus = {n.id for n in snap.numa_nodes if n.cpus}
    drawn = with_cpus if len(with_cpus) <= MAX_DISTANCE_NODES else set()
    left = len(snap.numa_nodes) - len(drawn)
    if left == 0 or len(snap.numa_nodes) < 2:
        return drawn, ""
    if drawn or len(with_cpus) <= 1:
        return drawn, f"NUMA distances of the {left} NUMA nodes without CPUs (device memory) not drawn: see " \
            "/v1/topology"
    return drawn, (f"NUMA distances not drawn ({len(with_cpus)} NUMA nodes with CPUs, more than {MAX_DISTANCE_NODES} "
                   "for a picture): see /v1/topology")


def picture_dot(snap: Snapshot) -> str:
    gpus = ordered_gpus(snap)
    gpu_names = {g.id: label for g, label in zip(gpus, gpu_labels(gpus), strict=True)}
    nic_by_pci = {n.pci_bus_id: n.name for n in snap.nics if n.pci_bus_id}
    switches = {s.id for s in snap.nvswitches}
    pci = {f.id: f for f in snap.pci}
    bad = {subject: shown(f"{kind}: {why}", None) for subject, kind, why in degraded(snap)}
    keep = _kept(pci, set(gpu_names) | set(nic_by_pci) | switches)
    drawn, note = _distances_drawn(snap)
    out = [f"graph {_q(shown(snap.node))} {{", "  graph [rankdir=TB, fontname=Helvetica, bgcolor=white];",
           "  node [fontname=Helvetica, shape=box, style=filled, fillcolor=white];",
           "  edge [fontname=Helvetica, fontsize=10];"]
    out += _numa_and_host_bridges(snap, {pci[b].parent for b in keep if b in pci and pci[b].parent.startswith("pci")})
    for bdf in sorted(keep):
        if bdf in gpu_names:
            label, fill = f"{shown(gpu_names[bdf])}\n{shown(bdf)}", "palegreen"
        elif bdf in nic_by_pci:
            label, fill = f"{shown(nic_by_pci[bdf])}\n{shown(bdf)}", "lightblue"
        elif bdf in switches:
            label, fill = f"NVSwitch\n{shown(bdf)}", "khaki"
        else:
            label, fill = f"PCIe bridge\n{shown(bdf)}", "gray95"
        out += _pci_function(pci[bdf], label, fill, bad.get(bdf))
    for sw in snap.nvswitches:
        if sw.id not in pci:
            out.append(f"  {_id(sw.id)} [label={_q('NVSwitch fabric')}, fillcolor=khaki];")
    out += _links(snap, bad, drawn)
    if note:
        out.append(f"  graph [labelloc=b, label={_q(note)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def _kept(pci: dict[str, PciFunction], endpoints: set[str]) -> set[str]:
    """The PCIe functions drawn: the endpoints and every bridge above them, up to the host bridge."""
    keep: set[str] = set()
    for bdf in endpoints:
        node = pci.get(bdf)
        while node is not None and node.id not in keep:
            keep.add(node.id)
            node = pci.get(node.parent)
    return keep


def _numa_and_host_bridges(snap: Snapshot, roots: set[str]) -> list[str]:
    out = []
    for numa in snap.numa_nodes:
        out.append(f"  {_id(numa.id)} [shape=ellipse, fillcolor=lightyellow, "
                   f"label={_q(f'NUMA {numa.os_index}' + chr(10) + f'{len(numa.cpus)} CPUs')}];")
    for hb in snap.host_bridges:
        if hb.id in roots:
            out.append(f"  {_id(hb.id)} [style=\"rounded,filled\", fillcolor=gray90, "
                       f"label={_q('HostBridge ' + shown(hb.id))}];")
            if hb.numa_node is not None:
                out.append(f"  {_id(f'numa{hb.numa_node}')} -- {_id(hb.id)} [penwidth=2];")
    return out


def _pci_function(f: PciFunction, label: str, fill: str, bad: str | None) -> list[str]:
    """The function's node, red with its reason when degraded, and its edge up the tree; a link trained
    narrower than it can is drawn red."""
    color = ", color=red, penwidth=3" if bad is not None else ""
    node = (f"  {_id(f.id)} [label={_q(label + (chr(10) + bad if bad is not None else ''))}, "
            f"fillcolor={fill}{color}];")
    s = f.link
    attrs = []
    if s and s.current_gen and s.current_width:
        attrs.append(f"label={_q(f'Gen{s.current_gen} x{s.current_width}')}")
        attrs.append(f"penwidth={_pen(pcie_bytes_per_second(s.current_gen, s.current_width))}")
    if s and s.max_width and s.current_width and s.current_width < s.max_width:
        attrs.append("color=red, style=bold")
    return [node, f"  {_id(f.parent)} -- {_id(f.id)}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";"]


def _links(snap: Snapshot, bad: dict[str, str], drawn: set[str]) -> list[str]:
    """NVLink edges as wide as their bandwidth (measured where there is a measurement), and the NUMA
    distances drawn."""
    measured = _measured(snap)
    out = []
    for link in snap.links:
        if link.kind is LinkKind.NVLINK:
            rate = measured.get(frozenset((link.a, link.b)), link.bytes_per_second)
            red = ", color=red" if link.a in bad or link.b in bad else ", color=darkgreen"
            out.append(f"  {_id(link.a)} -- {_id(link.b)} [label={_q(f'NV{link.count}')}, "
                       f"penwidth={_pen(rate)}{red}];")
        elif link.kind is LinkKind.NUMA and link.a < link.b and link.a in drawn and link.b in drawn:
            out.append(f"  {_id(link.a)} -- {_id(link.b)} [style=dashed, label={_q(str(link.numa_distance))}];")
    return out


@dataclass(frozen=True, slots=True)
class Svg:
    svg: bytes | None
    reason: str = ""  # why there is no picture


def render_svg(dot_text: str, *, timeout_s: float = 10.0, dot: str = "dot") -> Svg:
    exe = shutil.which(dot)
    if exe is None:
        return Svg(None, f"Graphviz is not installed: no {dot!r} on PATH (Debian package graphviz)")
    try:
        done = subprocess.run([exe, "-Tsvg"], input=dot_text.encode(), capture_output=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        return Svg(None, f"dot did not finish within {timeout_s:g} s")
    except OSError as exc:
        return Svg(None, f"dot could not run: {exc}")
    if done.returncode != 0:
        return Svg(None, f"dot failed ({done.returncode}): {done.stderr.decode(errors='replace')[-300:]}")
    return Svg(done.stdout)
