"""Cross-checks: two readings of one fact that cannot both be true. Pure.

  Invariant: a fact is known only if a source read it and no cross-check disputes it. When two witnesses
  contradict each other, neither side is picked: the contradiction is a problem naming the facts it
  leaves unknown (a sink keeps their last known values), and the snapshot is not complete.

Each check names what is genuinely impossible on a working machine, not what is merely unusual; every one
stays silent on the real machines' trees in tests/data/hwloc and on the machine profiles (a test checks).
Which checks there are, between which witnesses, and what each leaves unknown is the witness table
(``_witness.WITNESSES``): this module runs the table's ``cross-check`` rows in its order, and every problem
comes from the row (``Witness.dispute``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from topology import Aspect, Problem, SchemaError, Snapshot, SourceStatus, facts_of, physics_breaches, replace

from . import _crosscheck_ends as ends
from . import _crosscheck_numa as numa
from ._witness import WITNESSES, Stage, witness

_MELLANOX = 0x15B3
_RDMA_DRIVERS = ("mlx5_core", "mlx4_core")
_CLASS_INFINIBAND = 0x0207
_NUMA_DISTANCE = "numa_distance"


def _numa_cpus(snap: Snapshot) -> list[Problem]:
    owner: dict[int, str] = {}
    for n in snap.numa_nodes:
        for cpu in n.cpus:
            if cpu in owner:
                return [witness("numa-cpus").dispute((owner[cpu], n.id), f"CPU {cpu} is in {owner[cpu]}",
                                                     f"it is in {n.id}")]
            owner[cpu] = n.id
    return []


def _numa_distances(snap: Snapshot) -> list[Problem]:
    m = snap.matrix(_NUMA_DISTANCE)
    if m is None:
        return []
    for i, row in enumerate(m.values):
        for j, d in enumerate(row):
            if (i == j and d != 10) or (i != j and d <= 10):
                return [witness("numa-distance").dispute((_NUMA_DISTANCE,), "every node is 10 from itself and "
                                                         "farther from any other", f"{m.ids[i]} to {m.ids[j]} "
                                                         f"is {d:g}")]
    return []


def _root_numa(snap: Snapshot) -> list[Problem]:
    pci = {f.id: f for f in snap.pci}
    roots = {h.id for h in snap.host_bridges}
    under: dict[str, list[str]] = defaultdict(list)
    ends: dict[str, str | None] = {}  # a function: the root complex its chain of parents ends at (None: none)
    for f in snap.pci:
        chain, cur = [f.id], f.parent  # each function's chain walked once: one through it ends as its does
        while cur in pci and cur not in ends and cur not in chain:
            chain.append(cur)
            cur = pci[cur].parent
        end = ends.get(cur, cur if cur in roots else None)
        ends.update(dict.fromkeys(chain, end))
        if end is not None and f.numa_node is not None:
            under[end].append(f.id)
    out = []
    for root, ids in sorted(under.items()):
        by_node: dict[int, list[str]] = defaultdict(list)
        for i in ids:
            by_node[pci[i].numa_node or 0].append(i)
        if len(by_node) > 1:
            (n1, f1), (n2, f2) = sorted(by_node.items())[:2]
            out.append(witness("root-numa").dispute((root, *ids), f"node {n1} ({f1[0]})", f"node {n2} ({f2[0]})",
                                                    f" under {root}"))
    return out


def _link_over_max(snap: Snapshot) -> list[Problem]:
    out = []
    for f in snap.pci:
        link = f.link
        if link is None:
            continue
        for what, cur, top in (("generation", link.current_gen, link.max_gen),
                               ("width", link.current_width, link.max_width)):
            if cur is not None and top is not None and cur > top:
                out.append(witness("pcie-over-max").dispute((f.id,), f"{what} {cur}", f"at most {top}"))
                break
    return out


def _speed_without_width(snap: Snapshot) -> list[Problem]:
    out = []
    for f in snap.pci:
        link = f.link
        if link is None:
            continue
        for what, gen, width in (("current", link.current_gen, link.current_width),
                                 ("maximum", link.max_gen, link.max_width)):
            if (gen is None) != (width is None):
                out.append(witness("pcie-speed-width").dispute((f.id,), f"{what} {'unknown' if gen is None else gen}",
                                                               f"width {'down' if width is None else width}"))
                break
    return out


def _nvml_ancestor(snap: Snapshot) -> list[Problem]:
    m = snap.matrix("nvml_common_ancestor")
    if m is None:
        return []
    from topology import NVML_TOPOLOGY_LEVEL, PathClass, path_index  # the paths, for NVML's matrices alone

    level_class = {level: cls for cls, level in NVML_TOPOLOGY_LEVEL.items()} | {0: PathClass.PIX}
    index = path_index(snap)
    out = []
    for i, a in enumerate(m.ids):
        for j in range(i + 1, len(m.ids)):
            b, level = m.ids[j], int(m.values[i][j])
            said = level_class.get(level)
            if said is None:
                continue  # not read (-1), or a level nvidia-smi does not print: nothing to compare
            seen = index.pcie_class(a, b)
            if seen in (PathClass.UNKNOWN, PathClass.LOST) or seen is said:
                continue
            out.append(witness("nvml-ancestor").dispute((a, b), said.value, seen.value, f" between {a} and {b}"))
    return out


def _p2p_without_nvlink(snap: Snapshot) -> list[Problem]:
    m = snap.matrix("nvml_p2p_nvlink")
    if m is None:
        return []
    from topology import path_index

    k = snap.knowledge()
    index = path_index(snap)
    out = []
    for i, a in enumerate(m.ids):
        for j in range(i + 1, len(m.ids)):
            b = m.ids[j]
            if m.values[i][j] != 0 or index.nvlinks(a, b) or not (k.knows(a, Aspect.NVLINKS)
                                                                  and k.knows(b, Aspect.NVLINKS)):
                continue
            out.append(witness("nvml-p2p-nvlink").dispute((a, b), f"{a} and {b} do P2P over NVLink",
                                                          "no NVLink joins them"))
    return out


def _rdma_without_infiniband(snap: Snapshot) -> list[Problem]:
    ib = next((o for o in snap.sources if o.name == "infiniband"), None)
    if ib is None or ib.status is SourceStatus.DISABLED:
        return []
    bound = [f for f in snap.pci if f.vendor_id == _MELLANOX and f.driver in _RDMA_DRIVERS]
    rdma = {n.pci_bus_id for n in snap.nics if n.rdma}
    if ib.status is SourceStatus.ABSENT:
        odd = bound
    else:
        odd = [f for f in bound if f.class_code >> 8 == _CLASS_INFINIBAND and f.id not in rdma]
    if not odd:
        return []
    where = "it is missing" if ib.status is SourceStatus.ABSENT else "no RDMA device names them"
    return [witness("rdma-infiniband").dispute((f.id for f in odd), f"{len(odd)} function(s) bound to "
                                               f"{odd[0].driver}", where, " (the RDMA stack may still be loading)")]


def _nvml_version(snap: Snapshot) -> list[Problem]:
    """NVML's version is the CUDA major and the driver version (``12.570.124.06``: CUDA 12, driver 570.124.06)."""
    v = dict(snap.versions)
    nvml, driver, cuda = v.get("nvml"), v.get("nvidia_driver"), v.get("cuda_driver")
    if nvml is None or (driver is None and cuda is None):
        return []
    major, _, rest = nvml.partition(".")
    differ = ([f"driver {driver}"] if driver is not None and rest != driver else []) + (
        [f"CUDA {cuda}"] if cuda is not None and cuda.partition(".")[0] != major else [])
    return [witness("nvml-version").dispute(("nvml",), nvml, ", ".join(differ))] if differ else []


def _gpus(check: str) -> Callable[[Snapshot], list[Problem]]:
    """``_crosscheck_gpu``'s ``check``, loaded where the snapshot has a GPU: each of those compares readings of
    a GPU, so a snapshot without one has none to find (the module was about 1M instructions of every GPU-less
    start, measured)."""
    def run(snap: Snapshot) -> list[Problem]:
        if not snap.gpus:
            return []
        from . import _crosscheck_gpu

        found: list[Problem] = getattr(_crosscheck_gpu, check)(snap)
        return found
    return run


CHECK_OF: dict[str, Callable[[Snapshot], list[Problem]]] = {
    "numa-cpus": _numa_cpus, "numa-distance": _numa_distances, "root-numa": _root_numa,
    "pcie-over-max": _link_over_max, "pcie-speed-width": _speed_without_width, "gpu-pcie": _gpus("pcie"),
    "gpu-affinity": _gpus("affinity"),
    "gpu-pci-identity": _gpus("identity"), "nvml-ancestor": _nvml_ancestor, "nvml-p2p-nvlink": _p2p_without_nvlink,
    "fabric": _gpus("fabric"), "rdma-infiniband": _rdma_without_infiniband, "gpu-model": ends.gpu_model,
    "pcie-ends": ends.pcie_ends, "pci-numa-cpus": numa.pci_numa, "gpu-memory-numa": numa.gpu_memory_node,
    "fabric-domain": _gpus("fabric_domain"), "gpu-architecture": _gpus("architecture"), "nvml-version": _nvml_version,
}
CHECKS = tuple(CHECK_OF[w.key] for w in WITNESSES if w.stage == Stage.CROSS_CHECK)  # the table's order


def driver_version(snap: Snapshot, module: str | None) -> list[Problem]:
    """NVML's driver version against the loaded kernel module's (``None``: not read)."""
    nvml = dict(snap.versions).get("nvidia_driver")
    if nvml is None or module is None or nvml == module:
        return []
    return [witness("driver-version").dispute(("nvidia_driver",), nvml, module)]


def physics(snap: Snapshot) -> list[Problem]:
    """Live readings against the physics table (``topology.fabric._physics_rules``): a rate, generation, width
    or NVLink count the hardware cannot have is a problem naming it, and the fact is unknown. The rules are the
    ones that refuse a saved snapshot breaking them, so what discovery writes, the reader reads."""
    return [Problem(source=b.source, subject=",".join(b.subjects), message=f"{b.where.removeprefix('snapshot.')}: "
                    f"{b.message} (physics table): {b.aspect.value} unknown",
                    unknown=tuple(f for s in b.subjects for f in facts_of(s, b.aspect)))
            for b in physics_breaches(snap)]


def cross_check(snap: Snapshot, *, module_version: str | None = None) -> Snapshot:
    """``snap`` with a problem for every contradiction between its sources' readings, the table's order, then
    for every reading the physics table says no hardware has;
    ``module_version``: the NVIDIA kernel module's version, for ``driver-version`` (checked at discovery)."""
    found = [*driver_version(snap, module_version), *(p for check in CHECKS for p in check(snap)), *physics(snap)]
    if not found:
        return snap
    if snap.gpus:  # NVML's PCIe reading adopted where it overruled sysfs's: a GPU's
        from ._crosscheck_gpu import adopt_nvml_pcie

        snap = adopt_nvml_pcie(snap, found)
    sources = snap.sources
    rdma = next((p for p in found if p.source == "infiniband"), None)
    if rdma is not None:  # "absent" was a reading the PCI bus contradicts
        sources = tuple(replace(o, status=SourceStatus.FAILED, detail=rdma.message)
                        if o.name == "infiniband" and o.status is SourceStatus.ABSENT else o for o in sources)
    problems = sorted({*snap.problems, *found}, key=lambda p: (p.source, p.subject, p.message))
    return replace(snap, sources=sources, problems=tuple(problems))


def witnessed(snap: Snapshot) -> Snapshot:
    """``snap`` when the table's cross-checks find no contradiction it does not already own (a problem
    leaving the disputed facts unknown); :class:`SchemaError` naming the first otherwise. Run on every
    snapshot read back (``--from``, the agent's state, a probe report's), so a saved document is held to
    the rules live discovery keeps."""
    k = snap.knowledge()
    for check in CHECKS:
        for p in check(snap):
            known = [f for f in p.unknown if k.knows(f.subject, f.aspect)]
            if known:
                said = p.message.rsplit(": ", 1)[0]  # the readings, less "...: <facts> unknown"
                where = _field(snap, (known[0].subject, *p.subject.split(",")), known[0].aspect)
                raise SchemaError(f"{where} ({p.subject}): {said}, yet its {known[0].aspect.value} is said known")
    return snap


_LISTS = ("gpus", "nics", "pci", "nvswitches", "numa_nodes", "host_bridges")
_ASPECT_LIST = {Aspect.GPUS: "gpus", Aspect.NICS: "nics", Aspect.PCI: "pci", Aspect.NUMA: "numa_nodes"}


def _field(snap: Snapshot, subjects: tuple[str, ...], aspect: Aspect) -> str:
    """The document field a disputed fact is: the first subject's entry (``snapshot.gpus[3]``), a matrix by
    its name, or the list the node-wide aspect describes."""
    for subject in subjects:
        for name in _LISTS:
            i = next((i for i, e in enumerate(getattr(snap, name)) if e.id == subject), None)
            if i is not None:
                return f"snapshot.{name}[{i}]"
        i = next((i for i, m in enumerate(snap.matrices) if m.name == subject), None)
        if i is not None:
            return f"snapshot.matrices[{i}]"
    return f"snapshot.{_ASPECT_LIST.get(aspect, 'problems')}"
