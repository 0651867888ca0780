"""The human summary of a snapshot (``topolink discover --format table``)."""

from __future__ import annotations

from ..model._entities import PcieLinkState, Snapshot
from ..model._facts import describe_unknown
from ..model._ids import format_cpulist
from ..model._text_bounds import shown, shown_text
from ._no_gpu import no_gpu_reason


def _bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError  # pragma: no cover


def _pcie(state: PcieLinkState | None) -> str:
    if state is None or state.current_gen is None:
        return "?"
    text = f"Gen{state.current_gen} x{state.current_width or '?'}"
    if state.downtrained:
        text += f" (max Gen{state.max_gen or '?'} x{state.max_width or '?'}, DOWNTRAINED)"
    return text


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return ["  " + fmt.format(*header).rstrip(), *("  " + fmt.format(*r).rstrip() for r in rows)]


def summary(snap: Snapshot) -> str:
    from ._topo_table import matrix  # loaded here: ``no_gpu_reason`` has no use for it

    # Names, ids and messages come from sysfs, NVML or a saved snapshot: each is shown escaped and bounded.
    out = [f"Node {shown(snap.node)}", "", *_numa_section(snap)]
    bridges = sum(1 for f in snap.pci if f.is_bridge)
    out.append("")
    out.append(f"PCI: {_count(len(snap.pci), 'function')}, {_count(bridges, 'bridge')}, "
               f"{_count(len(snap.host_bridges), 'host bridge')}")
    out.append("")
    out += _gpu_section(snap)
    out.append("")
    out += _nic_section(snap)
    topo = matrix(snap, legend=False)
    if topo:
        out += ["", "Topology (nvidia-smi topo -m):", topo.rstrip("\n")]
    out.append("")
    out += _status_section(snap)
    return "\n".join(out) + "\n"


def _numa_section(snap: Snapshot) -> list[str]:
    dist = snap.matrix("numa_distance")
    return [f"NUMA nodes: {len(snap.numa_nodes)}", *_table(("node", "cpus", "memory", "distances"), [
        (shown(n.id), format_cpulist(n.cpus) or "-", _bytes(n.memory_bytes),
         " ".join(f"{v:g}" for v in dist.values[dist.ids.index(n.id)]) if dist and n.id in dist.ids else "?")
        for n in snap.numa_nodes
    ])]


def _gpu_section(snap: Snapshot) -> list[str]:
    from ..fabric._views import nvlink_islands
    from ..model._device_order import ordered_gpus
    from ._topo_table import gpu_labels

    gpus = ordered_gpus(snap)
    if not gpus:
        return [no_gpu_reason(snap) or ""]
    out = [f"GPUs: {len(gpus)}"]
    out += _table(("gpu", "bus id", "name", "numa", "pcie", "memory", "state"), [
        (shown(label), shown(g.id), shown(g.name or "?"), "-" if g.numa_node is None else str(g.numa_node),
         _pcie(g.pcie), _bytes(g.memory_bytes), "LOST" if g.lost else ("MIG" if g.mig_enabled else "ok"))
        for label, g in zip(gpu_labels(gpus), gpus, strict=True)
    ])
    if snap.nvswitches:
        out.append(f"NVSwitches: {len(snap.nvswitches)}")
    multi = [i for i in nvlink_islands(snap) if i.size > 1]
    if multi:
        out.append("NVLink islands: " + ", ".join(
            f"{isl.size} GPUs ({(isl.min_pair_bytes_per_second or 0) / 1e9:g} GB/s per direction, slowest pair)"
            for isl in multi))
    return out


def _nic_section(snap: Snapshot) -> list[str]:
    out = [f"NICs: {len(snap.nics)}"]
    if snap.nics:
        out += _table(("nic", "pci", "rdma", "numa", "ports", "netdevs"), [
            (shown(n.name), shown(n.pci_bus_id or "-"), "yes" if n.rdma else "no",
             "-" if n.numa_node is None else str(n.numa_node),
             ", ".join(f"{p.number}:{shown(p.state or '?')} {p.rate_gbps or '?'}Gb/s {shown(p.link_layer or '')}"
                       .strip() for p in n.ports) or "-",
             ",".join(shown(d) for d in n.netdevs) or "-")
            for n in snap.nics
        ])
    return out


def _status_section(snap: Snapshot) -> list[str]:
    out = ["Sources: " + ", ".join(f"{shown(o.name)}={o.status.value}" for o in snap.sources)]
    if not snap.complete:
        out.append("INCOMPLETE: these facts are unknown (N/A in the matrix, never guessed):")
        out += [f"  {line}" for line in describe_unknown(snap.unknown)]
    if snap.problems:
        out.append(f"Problems: {len(snap.problems)}")
        out += [f"  [{shown(p.source)}] {shown(p.subject)}: {shown_text(p.message)}" for p in snap.problems]
    return out


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
