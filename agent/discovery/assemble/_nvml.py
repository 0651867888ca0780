"""``merge_nvml``: NVML's facts into a sysfs snapshot, by canonical PCI bus id. Pure.

- GPUs: NVML's values win where it gave one; a GPU NVML sees and sysfs does not is added; a GPU on the
  PCI bus that NVML does not list is kept as sysfs saw it, with a problem.
- NVLinks: one :class:`Link` per GPU pair (bonded links counted once: the larger count of the two ends,
  a problem when the ends disagree), one per GPU and visible NVSwitch (remote bus id). A lost GPU keeps
  its place and what was read of it, marked ``lost``, but no NVLinks: it carries no traffic. Links whose remote
  is the sentinel ``FFFFFFFF:FF:FF.0`` go to one synthetic ``nvswitch0`` (not on PCI), counted from field
  147 (links connected to NVSwitches). ``topology.PathIndex`` then gives NV# = direct links + the smaller
  of the two GPUs' switch links.
- Matrices ``nvml_common_ancestor`` (nvmlGpuTopologyLevel_t) and ``nvml_p2p_<caps>`` (nvmlGpuP2PStatus_t)
  over the GPUs in NVML index order; -1 on the diagonal and where NVML did not answer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from topology import (
    NODE,
    Aspect,
    Gpu,
    Link,
    LinkKind,
    Matrix,
    MatrixKind,
    NvSwitch,
    PcieLinkState,
    Problem,
    Snapshot,
    facts_of,
    node_fact,
    nvlink_bytes_per_second,
)
from topology._record import replace

from ..sources._nvidia_proc import DriverGpuFacts
from ..sources.nvml import P2P_CAPS, REMOTE_GPU, REMOTE_SWITCH, REMOTE_UNKNOWN, NvmlFacts, NvmlGpuFacts
from . import _counts, _identity
from ._nvml_state import NVML_ONLY, SOURCE
from ._witness import witness

TYPE_CHECKING = False  # not typing's: importing typing costs start-up; mypy reads it as True
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")
_NVML_ONLY = NVML_ONLY
SYNTHETIC_SWITCH = "nvswitch0"
ANCESTOR_MATRIX = "nvml_common_ancestor"
_NVIDIA, _NVSWITCH_CLASS = 0x10DE, 0x0680


def merge_nvml(snap: Snapshot, facts: NvmlFacts, driver: Iterable[DriverGpuFacts] | None = None) -> Snapshot:
    """``driver``: the NVIDIA driver's own GPU list (``/proc/driver/nvidia/gpus``), None when not read."""
    problems: list[Problem] = list(snap.problems)
    gpus = {g.id: g for g in snap.gpus}
    placed = _identity.place(facts.gpus, driver, problems)
    problems += _identity.renamed(facts.problems, placed)
    for g in facts.gpus:
        bus = placed.get(g.index)
        if bus is None:
            if g.bus_id is None:
                problems.append(Problem(source=SOURCE, subject=f"nvml:gpu{g.index}",
                                        message="NVML GPU without a PCI bus id: not placed in the graph",
                                        unknown=(node_fact(Aspect.GPUS),)))
            continue
        gpus[bus] = _enrich(gpus.get(bus) or Gpu(id=bus), g)
    _identity.reconcile(gpus, driver, problems)
    pci_ids = {f.id for f in snap.pci}
    for gpu in gpus.values():
        if gpu.index is None:
            problems.append(Problem(source=SOURCE, subject=gpu.id,
                                    message="on the PCI bus but not among NVML's GPUs (not bound to the driver, "
                                            "excluded, or unreadable): what only NVML tells is unknown",
                                    unknown=facts_of(gpu.id, *_NVML_ONLY)))
        elif gpu.id not in pci_ids:
            problems.append(Problem(source=SOURCE, subject=gpu.id,
                                    message="NVML lists this GPU but the PCI source does not: its PCIe path and "
                                            "NUMA node are unknown",
                                    unknown=facts_of(gpu.id, Aspect.PCIE_PATH, Aspect.NUMA)))
    # A GPU lost, or one NVML could not name (no handle, no bus id: its pairs were not all asked) or cannot
    # place, leaves every other GPU's P2P row with it unknown.
    absent = sorted(placed.get(g.index) or f"nvml:gpu{g.index}" for g in facts.gpus
                    if g.lost or g.bus_id is None or g.index not in placed)
    if absent:
        peers = tuple(f for gid in sorted(placed.values()) if gid not in absent for f in facts_of(gid, Aspect.P2P))
        problems.append(Problem(source=SOURCE, subject=",".join(absent),
                                message="P2P status and common ancestor of every GPU with these GPU(s) unknown",
                                unknown=peers))
    problems += _counts.link_ends(facts, placed)
    switches = {s.id: s for s in snap.nvswitches}
    links = _nvlinks(snap, facts, placed, switches, problems)
    hidden = sorted(s for s, sw in switches.items() if not sw.visible_on_pci and s != SYNTHETIC_SWITCH)
    if hidden and not snap.knowledge().knows(NODE, Aspect.PCI):  # not seen on a bus nobody could read
        problems.append(Problem(source=SOURCE, subject=",".join(hidden), message="NVSwitches NVML names by bus "
                                "id while the PCI bus is unknown: what they are on it is unknown",
                                unknown=tuple(f for s in hidden for f in facts_of(s, Aspect.IDENTITY))))
    if absent and SYNTHETIC_SWITCH not in switches:  # it is known only through GPUs' links: maybe theirs
        problems.append(Problem(source=SOURCE, subject=SYNTHETIC_SWITCH, message="NVSwitches off the PCI bus are "
                                "seen only through GPUs' NVLinks, and some GPUs were not read",
                                unknown=facts_of(SYNTHETIC_SWITCH, Aspect.ALL)))
    versions = dict(snap.versions)
    for key, value in (("nvidia_driver", facts.driver_version), ("nvml", facts.nvml_version),
                       ("cuda_driver", facts.cuda_driver_version)):
        if value:
            versions[key] = value
    kept = [link for link in snap.links if link.kind is not LinkKind.NVLINK]
    ordered = sorted(gpus.values(), key=lambda g: (g.index is None, g.index or 0, g.id))
    matrices = [m for m in snap.matrices if not m.name.startswith("nvml_")] + _matrices(facts, placed)
    gpu_memory = {g.gpu_numa_id for g in ordered if g.gpu_numa_id is not None}
    numa_nodes = tuple(replace(n, gpu_memory=True) if n.os_index in gpu_memory and not n.gpu_memory else n
                       for n in snap.numa_nodes)
    return replace(
        snap,
        numa_nodes=numa_nodes,
        gpus=tuple(ordered),
        nvswitches=tuple(sorted(switches.values(), key=lambda s: s.id)),
        links=tuple(sorted([*kept, *links], key=lambda link: link.id)),
        matrices=tuple(matrices),
        versions=tuple(sorted(versions.items())),
        problems=tuple(sorted(set(problems), key=lambda p: (p.source, p.subject, p.message))),
    )


def _pick(new: T | None, old: T) -> T:
    return old if new is None else new


def _enrich(base: Gpu, g: NvmlGpuFacts) -> Gpu:
    pick = _pick
    return replace(
        base,
        index=g.index,
        minor=pick(g.minor, base.minor),
        uuid=pick(g.uuid, base.uuid),
        name=pick(g.name, base.name),
        memory_bytes=pick(g.memory_bytes, base.memory_bytes),
        pci_device_id=pick(g.pci_device_id, base.pci_device_id),
        gpu_numa_id=pick(g.gpu_numa_id, base.gpu_numa_id),
        cpu_affinity=pick(g.cpu_affinity, base.cpu_affinity),
        memory_affinity=pick(g.memory_affinity, base.memory_affinity),
        mig_enabled=pick(g.mig_enabled, base.mig_enabled),
        mig_instances=g.mig_instances or base.mig_instances,
        fabric=pick(g.fabric, base.fabric), platform=pick(g.platform, base.platform),
        pcie=_pcie(base.pcie, g.pcie),
        compute_capability=pick(g.compute_capability, base.compute_capability),
        architecture=pick(g.architecture, base.architecture),
        lost=g.lost or base.lost,
    )


def _pcie(sysfs: PcieLinkState | None, nvml: PcieLinkState | None) -> PcieLinkState | None:
    if nvml is None or sysfs is None:
        return nvml or sysfs
    return PcieLinkState(
        current_gen=sysfs.current_gen if nvml.current_gen is None else nvml.current_gen,
        current_width=sysfs.current_width if nvml.current_width is None else nvml.current_width,
        max_gen=sysfs.max_gen if nvml.max_gen is None else nvml.max_gen,
        max_width=sysfs.max_width if nvml.max_width is None else nvml.max_width,
    )


def _pci_switch(snap: Snapshot, bus_id: str) -> bool:
    f = next((p for p in snap.pci if p.id == bus_id), None)
    return f is not None and f.vendor_id == _NVIDIA and f.class_code >> 8 == _NVSWITCH_CLASS


def _nvlinks(snap: Snapshot, facts: NvmlFacts, placed: dict[int, str], switches: dict[str, NvSwitch],
             problems: list[Problem]) -> list[Link]:
    gpu_set = {g.id for g in snap.gpus} | set(placed.values())
    lost = {placed[g.index] for g in facts.gpus if g.lost and g.index in placed}
    seen: dict[tuple[str, str], int] = defaultdict(int)  # (this end, other end) -> active links seen here
    versions: dict[frozenset[str], set[int]] = defaultdict(set)
    pci_ids = {p.id for p in snap.pci}
    for g in facts.gpus:
        bus = placed.get(g.index)
        if bus is None or bus in lost:
            continue  # a lost GPU carries nothing: its links, read or half read, are left out
        sentinel = 0
        for link in g.links:
            if not link.active:
                continue
            if link.remote_sentinel:
                sentinel += 1
                if link.version is not None:
                    versions[frozenset((bus, SYNTHETIC_SWITCH))].add(link.version)
                continue
            remote = link.remote_bus_id
            if remote is None:
                continue  # unreadable: the GPU's NVLinks are unknown, a problem says so
            if remote in lost:
                problems.append(Problem(source=SOURCE, subject=bus,
                                        message=f"NVLink {link.link} goes to the lost GPU {remote}",
                                        unknown=facts_of(bus, Aspect.NVLINKS)))
                continue
            disputed = _counts.remote_type(bus, link.link, link.remote_type, remote, is_gpu=remote in gpu_set,
                                           pci_switch=_pci_switch(snap, remote))
            if disputed is not None:
                problems.append(disputed)
                continue
            to_switch = link.remote_type == REMOTE_SWITCH or (
                link.remote_type in (REMOTE_UNKNOWN, None) and (remote in switches or _pci_switch(snap, remote)))
            to_gpu = link.remote_type == REMOTE_GPU or remote in gpu_set
            if to_gpu and not to_switch and remote not in gpu_set:
                problems.append(Problem(source=SOURCE, subject=bus,
                                        message=f"NVLink {link.link} goes to GPU {remote}, which is not among the "
                                                "GPUs: its NVLinks are unknown",
                                        unknown=facts_of(bus, Aspect.NVLINKS)))
                continue
            if to_switch:
                switches.setdefault(remote, NvSwitch(id=remote, visible_on_pci=remote in pci_ids))
            elif not to_gpu:
                problems.append(Problem(source=SOURCE, subject=bus,
                                        message=f"NVLink {link.link} goes to {remote} (remote type "
                                                f"{link.remote_type}), neither a GPU nor an NVSwitch: not modelled"))
                continue
            seen[(bus, remote)] += 1
            if link.version is not None:
                versions[frozenset((bus, remote))].add(link.version)
        if sentinel:
            switches.setdefault(SYNTHETIC_SWITCH, NvSwitch(id=SYNTHETIC_SWITCH, visible_on_pci=False))
            seen[(bus, SYNTHETIC_SWITCH)] = sentinel
        to_switches = sum(n for (a, b), n in seen.items() if a == bus and b in switches)
        if g.nvswitch_link_count is not None and (to_switches or g.nvswitch_link_count) \
                and to_switches != g.nvswitch_link_count:
            problems.append(witness("nvswitch-links").dispute((bus,), g.nvswitch_link_count, to_switches))
    walked = {placed[g.index] for g in facts.gpus if g.index in placed and not g.lost}
    return _links_from_counts(seen, versions, walked, problems)


def _links_from_counts(seen: dict[tuple[str, str], int], versions: dict[frozenset[str], set[int]],
                       walked: set[str], problems: list[Problem]) -> list[Link]:
    """One link per pair; where both ends are GPUs NVML walked, their counts must agree (none is 0)."""
    out = []
    done: set[frozenset[str]] = set()
    for (a, b), count in sorted(seen.items()):
        pair = frozenset((a, b))
        if pair in done:
            continue
        done.add(pair)
        other = seen.get((b, a), 0 if b in walked and a in walked else None)
        if other is not None and other != count:
            problems.append(witness("nvlink-ends").dispute((e for e in pair if ":" in e), f"{count} ({a})",
                                                           f"{other} ({b})"))
        bonded = max(count, other or 0)
        gen = _counts.generation(pair, versions.get(pair, set()), problems)
        lo, hi = sorted(pair)
        out.append(Link(a=lo, b=hi, kind=LinkKind.NVLINK, count=bonded, nvlink_version=gen,
                        bytes_per_second=nvlink_bytes_per_second(gen, bonded)))
    return out


def _matrices(facts: NvmlFacts, placed: dict[int, str]) -> list[Matrix]:
    order = sorted(placed)
    if not order:
        return []
    ids = tuple(placed[i] for i in order)
    pos = {index: n for n, index in enumerate(order)}
    size = len(ids)
    grids: dict[str, list[list[float]]] = {name: [[-1.0] * size for _ in range(size)]
                                           for name in (ANCESTOR_MATRIX, *(f"nvml_p2p_{c}" for c in P2P_CAPS))}
    caps_name = {v: k for k, v in P2P_CAPS.items()}
    for p in facts.pairs:
        if p.a not in pos or p.b not in pos:
            continue
        i, j = pos[p.a], pos[p.b]
        cells = [(ANCESTOR_MATRIX, p.common_ancestor)]
        cells += [(f"nvml_p2p_{caps_name[c]}", s) for c, s in p.p2p if c in caps_name]
        for name, value in cells:
            if value is not None:
                grids[name][i][j] = grids[name][j][i] = float(value)
    out = []
    for name, grid in grids.items():
        ancestor = name == ANCESTOR_MATRIX
        out.append(Matrix(name=name, kind=MatrixKind.FROM_OS | MatrixKind.HOPS if ancestor else MatrixKind.FROM_OS,
                          unit="nvml_topology_level" if ancestor else "nvml_p2p_status", ids=ids,
                          values=tuple(tuple(row) for row in grid)))
    return out
