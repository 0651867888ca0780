"""The witness table: every fact discovery reads twice, and what it makes of two readings. Typed data.

  Rule: two readings that agree give the fact. Two that cannot both be true make the fact unknown, with a
  problem naming both readings, and neither side is picked; where a witness is known to be wrong in a
  stated situation (``wins``, an :class:`Overrule`), the other one's reading stands and a problem still
  says so.

Each row is checked at one place (``stage``, a :class:`Stage`): :attr:`Stage.CROSS_CHECK` rows by
``_crosscheck.cross_check`` over the assembled snapshot, in table order; the others where both readings are
at hand (a reading the snapshot does not keep). Every check builds its problem with :meth:`Witness.dispute`
or :meth:`Witness.judge`, so what becomes unknown is the row's. The reference's table is
:func:`witness_markdown` (a test keeps them equal), and the fuzz suite perturbs one witness of every row
(``tests/fuzz/witness_cases.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from topology import Aspect, Fact, Problem, Record, Snapshot, facts_of, node_fact


class Stage:
    """Where a row is checked: each place a string, as the reference's table names it (plain constants, not an
    enum: an enum class costs several plain classes to define at every start, and nothing here needs one)."""

    __slots__ = ()

    CROSS_CHECK = "cross-check"  # ``cross_check``, over the assembled snapshot, in table order
    CROSS_CHECK_MODULE = "cross-check (with the module version)"  # ``cross_check``, given the module's version
    MERGE_NVML = "merge_nvml"  # where NVML's readings join the bus's
    NVML_SOURCE = "nvml source"
    PCI_SOURCE = "pci source"
    ASSEMBLE = "assemble"


_HYPERVISORS = {0x1B36: "QEMU", 0x15AD: "VMware"}  # vendors of emulated PCIe ports


def emulated_port_above(snap: Snapshot, subject: str) -> str | None:
    """Why a hypervisor's port above the PCI function ``subject`` speaks for its own link, or None."""
    pci = {p.id: p for p in snap.pci}
    cur, seen = pci[subject].parent if subject in pci else None, {subject}
    while cur in pci and cur not in seen:
        seen.add(cur)
        vendor = _HYPERVISORS.get(pci[cur].vendor_id)
        if vendor is not None:
            return f"{cur} is a port {vendor} emulates"
        cur = pci[cur].parent
    return None


class Overrule(Record):
    """One witness's reading stands where ``holds`` says the situation holds for a subject (its reason)."""

    __slots__ = __match_args__ = ("winner", "situation", "holds")
    winner: str  # the witness whose reading stands, as the problem names it
    situation: str  # the situation, as the reference's table says it
    holds: Callable[[Snapshot, str], str | None]  # (snapshot, subject) -> why the situation holds, or None

    def __init__(self, *, winner: str, situation: str, holds: Callable[[Snapshot, str], str | None]) -> None:
        self._fill(locals())

    def __str__(self) -> str:
        return f"{self.winner} when {self.situation}"


class Witness(Record):
    """One fact two readings witness, which readings they are, and what is unknown when they disagree."""

    __slots__ = __match_args__ = ("key", "fact", "first", "second", "unknown", "node_wide", "wins", "source", "stage")
    key: str
    fact: str  # what is compared
    first: str  # one witness
    second: str  # the other
    unknown: tuple[Aspect, ...]  # aspects of the subjects the problem names, left unknown
    node_wide: bool  # ``unknown`` is of the node, not of the subjects
    wins: Overrule | None  # where one reading stands; None: neither does
    source: str  # the problem's source
    stage: str  # where it is checked: one of Stage's

    def __init__(self, *, key: str, fact: str, first: str, second: str, unknown: tuple[Aspect, ...],
                 node_wide: bool = False, wins: Overrule | None = None, source: str = "nvml",
                 stage: str = Stage.CROSS_CHECK) -> None:
        self._fill(locals())

    def facts(self, subjects: Iterable[str]) -> tuple[Fact, ...]:
        if self.node_wide:
            return tuple(node_fact(a) for a in self.unknown)
        return tuple(f for s in subjects for f in facts_of(s, *self.unknown))

    def dispute(self, subjects: Iterable[str], first: object, second: object, detail: str = "") -> Problem:
        """Both readings, neither picked: the row's facts of ``subjects`` are unknown."""
        names = sorted(set(subjects))
        what = ", ".join(a.value for a in self.unknown)
        return Problem(source=self.source, subject=",".join(names), message=f"{self.fact}: {self.first} says "
                       f"{first}, {self.second} says {second}{detail}: {what} unknown", unknown=self.facts(names))

    def judge(self, snap: Snapshot, subject: str, first: object, second: object) -> Problem:
        """Two readings of ``subject`` that differ: where the row's stated situation holds, the winner's reading
        stands and the problem says so (nothing unknown); elsewhere both readings are disputed."""
        why = self.wins.holds(snap, subject) if self.wins is not None else None
        if self.wins is None or why is None:
            return self.dispute((subject,), first, second)
        return Problem(source=self.source, subject=subject, message=f"{self.fact}: {self.first} says {first}, "
                       f"{self.second} says {second}; {why}, so {self.wins.winner} stands")


_A = Aspect
_S = Stage
WITNESSES: tuple[Witness, ...] = (
    Witness(key="numa-cpus", fact="the NUMA node of a CPU", first="one node's cpulist", second="another node's "
            "cpulist", unknown=(_A.NUMA,), node_wide=True, source="numa"),
    Witness(key="numa-distance", fact="NUMA distances", first="a node's distance to itself (10)",
            second="its distance to another node (more than 10)", unknown=(_A.NUMA,), node_wide=True, source="numa"),
    Witness(key="root-numa", fact="the NUMA node of a root complex", first="one function's numa_node",
            second="another function's under the same root complex (-1 says nothing)", unknown=(_A.NUMA,),
            source="pci"),
    Witness(key="pci-numa-cpus", fact="the NUMA node of a PCI function (a GPU's, a NIC's, a bridge's)",
            first="its numa_node", second="its local_cpus and the node's cpulist (the node exists and has CPUs, "
            "local_cpus is its CPUs or every CPU and names no CPU outside the nodes)", unknown=(_A.NUMA,),
            source="pci"),
    Witness(key="gpu-memory-numa", fact="the NUMA node of a GPU's memory", first="the GPU's memory node "
            "(NVML, the driver's numa_status)", second="the node list (the node exists, lists no CPU and holds memory)",
            unknown=(_A.NUMA,)),
    Witness(key="pcie-over-max", fact="a PCIe link's state", first="current_link_speed/width",
            second="max_link_speed/width (current above maximum)", unknown=(_A.PCIE_LINK,), source="pci"),
    Witness(key="pcie-speed-width", fact="whether a PCIe link is up", first="its speed (current_link_speed, or "
            "max_link_speed)", second="its width (current_link_width, or max_link_width: a link that is down has "
            "neither, one that is up both)", unknown=(_A.PCIE_LINK,), source="pci"),
    Witness(key="pcie-ends", fact="a PCIe link's trained state", first="the device's current_link_speed/width",
            second="its upstream port's (one link has one trained state; a port a hypervisor emulates, vendor "
            "1b36 QEMU or 15ad VMware, reports its own link and is not compared)", unknown=(_A.PCIE_LINK,),
            source="pci"),
    Witness(key="gpu-pcie", fact="a GPU's PCIe generation and width",
            first="NVML (nvmlDeviceGetCurrPcieLink*, GetMaxPcieLink*)", second="sysfs (current_/max_link_speed, "
            "current_/max_link_width; NVML's maximum may be the upstream port's, if lower)", unknown=(_A.PCIE_LINK,),
            wins=Overrule(winner="NVML", situation="a port above the GPU is emulated by a hypervisor (vendor 1b36 "
                          "QEMU, 15ad VMware), which reports its own link", holds=emulated_port_above)),
    Witness(key="gpu-affinity", fact="a GPU's NUMA locality", first="NVML (nvmlDeviceGetCpuAffinity, "
            "GetMemoryAffinity)", second="the kernel (local_cpulist, numa_node; -1 says nothing)",
            unknown=(_A.NUMA,)),
    Witness(key="gpu-pci-identity", fact="what the PCI function of a GPU is",
            first="NVML (a GPU, its pciDeviceId)", second="sysfs (vendor, device, class)", unknown=(_A.IDENTITY,)),
    Witness(key="gpu-model", fact="what model a GPU is", first="NVML's product name (nvmlDeviceGetName)",
            second="its PCI device id (by the physics table's GPU families)", unknown=(_A.IDENTITY,)),
    Witness(key="gpu-driver-model", fact="what model a GPU is", first="NVML's product name (nvmlDeviceGetName)",
            second="the driver's Model (`/proc/driver/nvidia/gpus/<bus id>/information`; by the physics table's "
            "GPU families)", unknown=(_A.IDENTITY,), stage=_S.MERGE_NVML),
    Witness(key="driver-gpus", fact="which GPUs the node has", first="NVML's GPUs (by bus id)",
            second="the driver's list (`/proc/driver/nvidia/gpus`, less the GPUs it excludes)", unknown=(_A.GPUS,),
            node_wide=True, stage=_S.MERGE_NVML),
    Witness(key="gpu-memory-node", fact="the NUMA node of a GPU's memory", first="NVML (nvmlDeviceGetNumaNodeId)",
            second="the driver (`/proc/driver/nvidia/gpus/<bus id>/numa_status`)", unknown=(_A.NUMA,),
            stage=_S.MERGE_NVML),
    Witness(key="gpu-minor", fact="a GPU's device minor", first="NVML (nvmlDeviceGetMinorNumber)",
            second="the driver (`/proc/driver/nvidia/gpus/<bus id>/information`)", unknown=(_A.IDENTITY,),
            stage=_S.MERGE_NVML),
    Witness(key="gpu-uuid", fact="a GPU's UUID", first="NVML (nvmlDeviceGetUUID)",
            second="the driver (`/proc/driver/nvidia/gpus/<bus id>/information`)", unknown=(_A.IDENTITY,),
            stage=_S.MERGE_NVML),
    Witness(key="nvml-ancestor", fact="the PCIe path between two GPUs", first="NVML's common ancestor",
            second="the PCIe tree in sysfs", unknown=(_A.PCIE_PATH, _A.NUMA, _A.P2P)),
    Witness(key="nvml-p2p-nvlink", fact="NVLinks between two GPUs", first="NVML's P2P status over NVLink",
            second="the NVLinks NVML's per-link calls read", unknown=(_A.NVLINKS, _A.P2P)),
    Witness(key="nvlink-count", fact="how many NVLinks a GPU has", first="NVML's link-count field (91)",
            second="NVML's per-link calls (an error before the last link is no end)", unknown=(_A.NVLINKS,),
            stage=_S.NVML_SOURCE),
    Witness(key="nvswitch-links", fact="how many NVLinks of a GPU reach NVSwitches",
            first="NVML's NVSwitch link-count field (147)", second="NVML's per-link remote types and ends",
            unknown=(_A.NVLINKS,), stage=_S.MERGE_NVML),
    Witness(key="nvlink-ends", fact="NVLinks between two GPUs", first="the count read at one end",
            second="the count read at the other", unknown=(_A.NVLINKS,), stage=_S.MERGE_NVML),
    Witness(key="nvlink-version", fact="the NVLink version of a bond",
            first="one link's nvmlDeviceGetNvLinkVersion", second="another link's of the same bond",
            unknown=(_A.NVLINKS,), stage=_S.MERGE_NVML),
    Witness(key="nvlink-remote-type", fact="what an NVLink reaches", first="NVML's remote device type "
            "(nvmlDeviceGetNvLinkRemoteDeviceType)", second="what is at the remote bus id (NVML's GPUs, the PCI "
            "class of an NVSwitch)", unknown=(_A.NVLINKS,), stage=_S.MERGE_NVML),
    Witness(key="driver-version", fact="the NVIDIA driver version", first="NVML (nvmlSystemGetDriverVersion)",
            second="the kernel module (`/proc/driver/nvidia/version`)", unknown=(_A.VERSIONS,), node_wide=True,
            stage=_S.CROSS_CHECK_MODULE),
    Witness(key="fabric", fact="a GPU's NVLink domain", first="NVML's NVLinks to NVSwitches off the node, or a "
            "product of a multi-node NVLink domain (GB200, GB300)", second="NVML's fabric info "
            "(nvmlDeviceGetGpuFabricInfoV: unreadable, or not completed)", unknown=(_A.FABRIC,)),
    Witness(key="fabric-domain", fact="a GPU's NVLink domain", first="one GPU's fabric info (cluster UUID, "
            "clique)", second="another's whose NVLinks reach the same NVSwitch (one switch is in one domain)",
            unknown=(_A.FABRIC,)),
    Witness(key="gpu-architecture", fact="a GPU's architecture", first="NVML's architecture "
            "(nvmlDeviceGetArchitecture)", second="the major of its compute capability "
            "(nvmlDeviceGetCudaComputeCapability, by CUDA's table; an architecture number no row names is "
            "no agreement)", unknown=(_A.IDENTITY,)),
    Witness(key="nvml-version", fact="the NVML library's version", first="NVML's version "
            "(nvmlSystemGetNVMLVersion: <CUDA major>.<driver version>)", second="the driver version and the CUDA "
            "version NVML gives (nvmlSystemGetDriverVersion, nvmlSystemGetCudaDriverVersion)",
            unknown=(_A.VERSIONS,), node_wide=True),
    Witness(key="pci-bus-id", fact="the function at a bus id", first="one directory in /sys/devices",
            second="another directory there with the same bus id", unknown=(_A.PCI,), node_wide=True,
            source="pci", stage=_S.PCI_SOURCE),
    Witness(key="nic-function", fact="the PCI function of a network interface", first="the RDMA device "
            "(`/sys/class/infiniband/<dev>/device/net`)", second="the interface (`/sys/class/net/<if>/device`)",
            unknown=(_A.NICS,), node_wide=True, source="net", stage=_S.ASSEMBLE),
    Witness(key="rdma-infiniband", fact="which NICs do RDMA", first="the PCI bus (Mellanox functions bound to "
            "mlx5_core/mlx4_core)", second="`/sys/class/infiniband`", unknown=(_A.NICS,), node_wide=True,
            source="infiniband"),
)
BY_KEY = {w.key: w for w in WITNESSES}


def witness(key: str) -> Witness:
    return BY_KEY[key]


def witness_markdown() -> str:
    """The reference's table of witness pairs, generated from :data:`WITNESSES`."""
    lines = ["| check | fact | one witness | the other | what wins | unknown on disagreement | checked in |",
             "|---|---|---|---|---|---|---|"]
    for w in WITNESSES:
        unknown = ", ".join(f"`{a.value}`" for a in w.unknown) + (" (node-wide)" if w.node_wide else "")
        wins = str(w.wins) if w.wins is not None else "neither"
        cells = (f"`{w.key}`", w.fact, w.first, w.second, wins, unknown, w.stage)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
