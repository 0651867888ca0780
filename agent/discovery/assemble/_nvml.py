"""``merge_nvml``: NVML's facts into a sysfs snapshot, by canonical PCI bus id. Pure.

- GPUs: NVML's values win where it gave one; a GPU NVML sees and sysfs does not is added; a GPU on the
  PCI bus that NVML does not list is kept as sysfs saw it, with a problem.
- NVLinks (``_nvml_links``): one :class:`Link` per GPU pair (bonded links counted once: the larger count
  of the two ends, a problem when the ends disagree), one per GPU and visible NVSwitch (remote bus id). A lost GPU keeps
  its place and what was read of it, marked ``lost``, but no NVLinks: it carries no traffic. Links whose remote
  is the sentinel ``FFFFFFFF:FF:FF.0`` go to one synthetic ``nvswitch0`` (not on PCI), counted from field
  147 (links connected to NVSwitches). ``topology.PathIndex`` then gives NV# = direct links + the smaller
  of the two GPUs' switch links.
- Matrices ``nvml_common_ancestor`` (nvmlGpuTopologyLevel_t) and ``nvml_p2p_<caps>`` (nvmlGpuP2PStatus_t)
  over the GPUs in NVML index order; -1 on the diagonal and where NVML did not answer.
"""

from __future__ import annotations

from collections.abc import Iterable

from topology import (
    NODE,
    Aspect,
    Gpu,
    LinkKind,
    Matrix,
    MatrixKind,
    NvSwitch,
    PcieLinkState,
    Problem,
    Snapshot,
    facts_of,
    node_fact,
    replace,
)

from ..sources._nvidia_proc import DriverGpuFacts
from ..sources.nvml import P2P_CAPS, NvmlFacts, NvmlGpuFacts
from . import _counts, _identity
from ._crosscheck_ends import driver_gpus
from ._nvml_links import nvlinks
from ._nvml_state import NVML_ONLY, SOURCE, SYNTHETIC_SWITCH

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")
_NVML_ONLY = NVML_ONLY
ANCESTOR_MATRIX = "nvml_common_ancestor"


def merge_nvml(snap: Snapshot, facts: NvmlFacts, driver: Iterable[DriverGpuFacts] | None = None) -> Snapshot:
    """``driver``: the NVIDIA driver's own GPU list (``/proc/driver/nvidia/gpus``), None when not read."""
    problems: list[Problem] = list(snap.problems)
    placed = _identity.place(facts.gpus, driver, problems)
    problems += _identity.renamed(facts.problems, placed)
    gpus = _merge_gpus(snap, facts, placed, driver, problems)
    # A GPU lost, or one NVML could not name (no handle, no bus id: its pairs were not all asked) or cannot
    # place, leaves every other GPU's P2P row with it unknown.
    absent = sorted(placed.get(g.index) or f"nvml:gpu{g.index}" for g in facts.gpus
                    if g.lost or g.bus_id is None or g.index not in placed)
    absent += sorted(g.id for g in snap.gpus if g.id not in placed.values())  # on the bus, not among NVML's
    if absent:
        peers = tuple(f for gid in sorted(placed.values()) if gid not in absent for f in facts_of(gid, Aspect.P2P))
        problems.append(Problem(source=SOURCE, subject=",".join(absent),
                                message="P2P status and common ancestor of every GPU with these GPU(s) unknown",
                                unknown=peers))
    problems += _counts.link_ends(facts, placed)
    switches = {s.id: s for s in snap.nvswitches}
    links = nvlinks(snap, facts, placed, switches, problems)
    problems += _switches_unknown(snap, switches, bool(absent))
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


def _merge_gpus(snap: Snapshot, facts: NvmlFacts, placed: dict[int, str], driver: Iterable[DriverGpuFacts] | None,
                problems: list[Problem]) -> dict[str, Gpu]:
    """The bus's GPUs with NVML's values where it gave one, and NVML's GPUs the bus does not show; a GPU
    only one side lists is a problem naming what the other side alone tells."""
    gpus = {g.id: g for g in snap.gpus}
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
    if driver is not None and all(g.bus_id is not None for g in facts.gpus):  # an unnamed one is said already
        listed = driver_gpus(set(placed.values()), {d.bus_id for d in driver if d.excluded is not True})
        problems += [listed] if listed is not None else []
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
    return gpus


def _switches_unknown(snap: Snapshot, switches: dict[str, NvSwitch], gpus_unread: bool) -> list[Problem]:
    """NVSwitches NVML names that nothing else can say what they are."""
    out = []
    hidden = sorted(s for s, sw in switches.items() if not sw.visible_on_pci and s != SYNTHETIC_SWITCH)
    if hidden and not snap.knowledge().knows(NODE, Aspect.PCI):  # not seen on a bus nobody could read
        out.append(Problem(source=SOURCE, subject=",".join(hidden), message="NVSwitches NVML names by bus "
                           "id while the PCI bus is unknown: what they are on it is unknown",
                           unknown=tuple(f for s in hidden for f in facts_of(s, Aspect.IDENTITY))))
    if gpus_unread and SYNTHETIC_SWITCH not in switches:  # it is known only through GPUs' links: maybe theirs
        out.append(Problem(source=SOURCE, subject=SYNTHETIC_SWITCH, message="NVSwitches off the PCI bus are "
                           "seen only through GPUs' NVLinks, and some GPUs were not read",
                           unknown=facts_of(SYNTHETIC_SWITCH, Aspect.ALL)))
    return out


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
