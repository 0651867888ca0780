"""Cross-checks of a GPU's facts that NVML and the kernel both give, and of its NVLink domain. Pure.

The merged snapshot keeps both readings where they differ: a GPU's own fields carry NVML's value where NVML
gave one (``merge_nvml``), its PCI function carries sysfs's. Each check here is one row of the witness table
(``_witness.WITNESSES``), and compares only where both witnesses said something: a value one of them did
not read is no disagreement (the failed read is a problem of its own).
"""

from __future__ import annotations

from collections.abc import Iterator

from topology import (
    FabricState,
    Gpu,
    LinkKind,
    PcieLinkState,
    PciFunction,
    Problem,
    Snapshot,
    format_cpulist,
    pcie_bytes_per_second,
    replace,
)

from ._nvml_state import SYNTHETIC_SWITCH
from ._witness import witness

_NVIDIA = 0x10DE
_GPU_CLASSES = (0x0300, 0x0302)
_MULTI_NODE_PRODUCTS = ("GB200", "GB300")  # NVL72-class: the NVLink domain spans trays
# CUDA's compute capabilities per architecture (CUDA C++ Programming Guide, "Compute Capabilities"): a major,
# or (major, minor) where two architectures share a major (Volta 7.0/7.2 and Turing 7.5; Ampere 8.0/8.6/8.7
# and Ada 8.9).
_CC: dict[str, set[int | tuple[int, int]]] = {
    "kepler": {3}, "maxwell": {5}, "pascal": {6}, "volta": {(7, 0), (7, 2)}, "turing": {(7, 5)},
    "ampere": {(8, 0), (8, 6), (8, 7), (8, 8)}, "ada": {(8, 9)}, "hopper": {9}, "blackwell": {10, 11, 12}}


def _read_gpus(snap: Snapshot) -> Iterator[tuple[Gpu, PciFunction]]:
    """GPUs NVML read (an index, not lost) with the PCI function sysfs read at their bus id."""
    pci = {f.id: f for f in snap.pci}
    for g in snap.gpus:
        f = pci.get(g.id)
        if g.index is not None and not g.lost and f is not None:
            yield g, f


def _fields(link: PcieLinkState) -> tuple[tuple[str, int | None], ...]:
    return (("current generation", link.current_gen), ("current width", link.current_width),
            ("maximum generation", link.max_gen), ("maximum width", link.max_width))


def pcie(snap: Snapshot) -> list[Problem]:
    """NVML's maximum is "possible with this device and system": the device's own (sysfs ``max_link_*``), or
    the lower of it and its upstream port's (a Gen5 GPU in a Gen4 slot). Either is agreement."""
    row = witness("gpu-pcie")
    ports = {p.id: p.link for p in snap.pci if p.link is not None}
    out = []
    for g, f in _read_gpus(snap):
        if g.pcie is None or f.link is None:
            continue
        port = ports.get(f.parent)
        slot = (None, None, port.max_gen, port.max_width) if port is not None else (None,) * 4
        differ = [(what, a, b) for (what, a), (_, b), s in zip(_fields(g.pcie), _fields(f.link), slot, strict=True)
                  if a is not None and b is not None and a != b and (s is None or a != min(b, s))]
        if not differ:
            continue
        said = "; ".join(f"{what} {a}" for what, a, _ in differ), "; ".join(f"{what} {b}" for what, _, b in differ)
        out.append(row.judge(snap, g.id, *said))
    return out


def adopt_nvml_pcie(snap: Snapshot, found: list[Problem]) -> Snapshot:
    """Where NVML's PCIe reading stands over an emulated port's (an overruled ``gpu-pcie``), the GPU's PCI
    function and its PCIe link carry NVML's reading too: one value of the fact, the winner's."""
    row = witness("gpu-pcie")
    won = {p.subject for p in found if p.source == row.source and not p.unknown and p.message.startswith(row.fact)}
    if not won:
        return snap
    nvml = {g.id: g.pcie for g in snap.gpus if g.id in won}
    pci = tuple(replace(f, link=nvml[f.id]) if f.id in nvml else f for f in snap.pci)
    links = tuple(replace(lk, pcie=state, bytes_per_second=pcie_bytes_per_second(
        state.current_gen, state.current_width) if state else None)
        if lk.kind is LinkKind.PCIE and lk.a in nvml and (state := nvml[lk.a]) is not None else lk
        for lk in snap.links)
    return replace(snap, pci=pci, links=links)


def affinity(snap: Snapshot) -> list[Problem]:
    """NVML's CPU affinity against the kernel's ``local_cpulist`` (online CPUs only), NVML's memory affinity
    against ``numa_node``. A function the kernel gives no node (-1, every CPU local) is not compared."""
    row = witness("gpu-affinity")
    online = {c for n in snap.numa_nodes for c in n.cpus}
    out = []
    nodes = {n.os_index for n in snap.numa_nodes}
    for g, f in _read_gpus(snap):
        if g.cpu_affinity and online and not set(g.cpu_affinity) & online:  # whatever the function's node says
            out.append(row.dispute((g.id,), f"CPUs {_cpus(set(g.cpu_affinity))}", "none of them online"))
            continue
        if g.memory_affinity and nodes and not set(g.memory_affinity) <= nodes:
            out.append(row.dispute((g.id,), f"memory nodes {_cpus(set(g.memory_affinity))}",
                                   f"nodes {_cpus(nodes)}"))
            continue
        if f.numa_node is None:
            continue
        nvml, kernel = set(g.cpu_affinity) & online, set(f.local_cpus or ()) & online
        if kernel and nvml != kernel:  # none online (none, or only CPUs no node has) is no affinity either
            out.append(row.dispute((g.id,), f"CPUs {_cpus(nvml) or 'none online'}", f"CPUs {_cpus(kernel)}"))
        elif g.memory_affinity is not None and f.numa_node not in g.memory_affinity:
            out.append(row.dispute((g.id,), f"memory nodes {_cpus(set(g.memory_affinity))}",
                                   f"node {f.numa_node}"))
    return out


def architecture(snap: Snapshot) -> list[Problem]:
    """``gpu-architecture``: NVML's architecture against the major of its compute capability (CUDA's table)."""
    row = witness("gpu-architecture")
    out = []
    for g in snap.gpus:
        if g.architecture is None or g.compute_capability is None:
            continue
        said = _CC.get(g.architecture)
        if said is None and not g.architecture.startswith("unknown("):
            continue  # an architecture the agent names but CUDA's table here does not: nothing to compare
        cc: set[int | tuple[int, int]] = {g.compute_capability[0], g.compute_capability}
        if said is None or not cc & said:
            out.append(row.dispute((g.id,), g.architecture, "compute capability {}.{}".format(*g.compute_capability)))
    return out


def fabric_domain(snap: Snapshot) -> list[Problem]:
    """``fabric-domain``: GPUs whose NVLinks reach one NVSwitch are in one NVLink domain: the fabric info of each
    (completed) names the same cluster and clique."""
    row = witness("fabric-domain")
    switches = {s.id for s in snap.nvswitches}
    said = {g.id: (g.fabric.cluster_uuid, g.fabric.clique_id) for g in snap.gpus if g.fabric is not None
            and g.fabric.state is FabricState.COMPLETED and not g.lost}
    reach: dict[str, set[str]] = {}
    for lk in snap.links:
        if lk.kind is LinkKind.NVLINK and {lk.a, lk.b} & switches:
            gpu, switch = (lk.a, lk.b) if lk.b in switches else (lk.b, lk.a)
            if gpu in said:
                reach.setdefault(switch, set()).add(gpu)
    out: list[Problem] = []
    for switch, gpus in sorted(reach.items()):
        domains = {said[g] for g in gpus}
        if len(domains) > 1 and not any(set(p.subject.split(",")) == gpus for p in out):
            (a, b), order = sorted(domains, key=str)[:2], sorted(gpus)
            out.append(row.dispute(order, f"cluster {a[0]} clique {a[1]}", f"cluster {b[0]} clique {b[1]}",
                                   f" (GPUs joined through {switch})"))
    return out


def _cpus(values: set[int]) -> str:
    return format_cpulist(sorted(values))


def identity(snap: Snapshot) -> list[Problem]:
    """A function NVML calls a GPU is an NVIDIA display controller with NVML's device id (0: unread)."""
    row = witness("gpu-pci-identity")
    out = []
    for g, f in _read_gpus(snap):
        theirs = []
        if f.vendor_id and f.vendor_id != _NVIDIA:
            theirs.append(f"vendor {f.vendor_id:04x}")
        if f.class_code and f.class_code >> 8 not in _GPU_CLASSES:
            theirs.append(f"class {f.class_code:06x}")
        if g.pci_device_id is not None and f.device_id and f.device_id != g.pci_device_id:
            theirs.append(f"device {f.device_id:04x}")
        if theirs:
            device = "" if g.pci_device_id is None else f" {_NVIDIA:04x}:{g.pci_device_id:04x}"
            out.append(row.dispute((g.id,), f"an NVIDIA GPU{device}", ", ".join(theirs)))
    return out


def fabric(snap: Snapshot) -> list[Problem]:
    """A GPU whose NVLinks reach NVSwitches off the node, or a product of a multi-node NVLink domain, has a
    clique only the fabric info tells: unread or not completed, its NVLink domain is unknown (never the
    node alone)."""
    row = witness("fabric")
    off_node = {s.id for s in snap.nvswitches if not s.visible_on_pci} | {SYNTHETIC_SWITCH}
    ends: dict[str, set[str]] = {}  # each device's NVLink ends off the node, in one pass over the links
    for lk in snap.links:
        if lk.kind is LinkKind.NVLINK and (lk.a in off_node or lk.b in off_node):
            ends.setdefault(lk.a, set()).add(lk.b)
            ends.setdefault(lk.b, set()).add(lk.a)
    out = []
    for g in snap.gpus:
        if g.index is None or g.lost:
            continue
        reach = sorted(ends.get(g.id, ()))
        product = next((p for p in _MULTI_NODE_PRODUCTS if g.name and p in g.name.upper()), None)
        if (not reach and product is None) or (g.fabric is not None and g.fabric.clique is not None):
            continue
        said = f"NVLinks to {', '.join(reach)}" if reach else f"a {g.name}"
        state = "no fabric info" if g.fabric is None else f"fabric {g.fabric.state.value}" + (
            "" if g.fabric.cluster_uuid else ", no cluster UUID")
        out.append(row.dispute((g.id,), said, state))
    return out
