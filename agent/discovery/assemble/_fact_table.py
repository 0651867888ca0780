"""The facts table: for every fact of a snapshot, per kind of entity, the files and NVML calls that say it and
the witness rows that compare them; a fact with one witness says why one is all there is. Typed data.

``kind`` is the entity as the snapshot holds it (``pci`` is every PCI function: a GPU's, a NIC's, a bridge's
and a switch port's; ``node`` the node-wide facts: NUMA nodes and CPUs, which GPUs and NICs there are, GDR,
versions). ``files`` are glob patterns below the root (``*`` spans ``/``): every file a discovery reads is
named by some row (a test lists them on every machine tree), and the truth sweep (tests/test_truth_sweep.py)
edits each; an edit may change a fact only where the fact is then unknown, or where its row has no check.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass

from topology import Aspect

from ._witness import BY_KEY


@dataclass(frozen=True, slots=True, kw_only=True)
class FactRow:
    kind: str  # gpu, nic, pci, host-bridge, nvswitch, node
    aspect: Aspect
    what: str  # the fact in words
    files: tuple[str, ...] = ()  # glob patterns below the root
    calls: tuple[str, ...] = ()  # NVML calls
    checks: tuple[str, ...] = ()  # witness rows (``_witness.WITNESSES`` keys) comparing the readings
    one_witness: str = ""  # why one reading is all there is; "" where ``checks`` compare two
    part: str = ""  # a part of the fact with witnesses of its own ("" the whole)
    alone_where: str = ""  # where the checks have nothing to compare, so one reading stands alone

    @property
    def witnesses(self) -> int:
        return 1 if self.one_witness else 2


_A = Aspect
_PCI = ("sys/devices/pci*", "sys/bus/pci/devices/*")  # a function's directory, or the bus's link to it
_FN_ID = tuple(f"{d}/{n}" for d in _PCI for n in ("vendor", "device", "class", "config"))
_FN_NUMA = tuple(f"{d}/{n}" for d in _PCI for n in ("numa_node", "local_cpus", "local_cpulist"))
_FN_LINK = tuple(f"{d}/{n}_link_{w}" for d in _PCI for n in ("current", "max") for w in ("speed", "width"))
_NODE = "sys/devices/system/node/node*"
_NODE_CPUS = (f"{_NODE}/cpulist", "sys/devices/system/cpu/online")
_DRIVER = "proc/driver/nvidia/gpus/*"
_IB_PORT = tuple(f"sys/class/infiniband/*/ports/*/{n}" for n in ("rate", "state", "link_layer"))
_NET = tuple(f"sys/class/net/*/{n}" for n in ("speed", "operstate", "type"))
_AFFINITY = ("nvmlDeviceGetCpuAffinity", "nvmlDeviceGetMemoryAffinity", "nvmlDeviceGetNumaNodeId")
_PCIE_CALLS = ("nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
               "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth")
_NVLINK_CALLS = ("nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkVersion", "nvmlDeviceGetNvLinkRemoteDeviceType",
                 "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetFieldValues")
_NUMA_ALONE = ("its numa_node is -1 (real kernels give -1 beside functions of the same root complex that name a "
               "node, with any local_cpus: -1, or a node every other reading agrees with, is all there is), or "
               "every function under its root complex says -1 or lists every CPU (either reading then says "
               "nothing of the other)")
_NUMA_CHECKS = ("numa-cpus", "numa-distance", "pci-numa-cpus", "gpu-memory-numa")

FACT_ROWS: tuple[FactRow, ...] = (
    FactRow(kind="pci", aspect=_A.IDENTITY, what="what a PCI function is (vendor, device, class)", files=_FN_ID,
            one_witness="the kernel's vendor, device and class files are its one copy of the configuration header "
            "(config is read for a bridge's ACS capability only); a GPU's is compared with NVML (gpu-pci-identity)"),
    FactRow(kind="pci", aspect=_A.NUMA, what="a PCI function's NUMA node and local CPUs", files=(*_FN_NUMA,
            *_NODE_CPUS), checks=("pci-numa-cpus", "root-numa"), alone_where=_NUMA_ALONE),
    FactRow(kind="pci", aspect=_A.PCIE_LINK, what="a PCI function's link (current and maximum speed and width)",
            files=_FN_LINK, checks=("pcie-over-max", "pcie-speed-width", "pcie-ends"),
            alone_where="its upstream port reports no current link (a root port's own, a bus without link "
            "files): a current below the maximum is a downtrained link, no contradiction"),
    FactRow(kind="pci", aspect=_A.PCIE_LINK, part="maximum", what="a PCI function's maximum link speed and width",
            files=tuple(f for f in _FN_LINK if "/max_" in f), one_witness="max_link_speed/width are the kernel's "
            "one copy of the function's Link Capabilities (a maximum below the current link is refused: "
            "pcie-over-max; a GPU's is compared with NVML: gpu-pcie)"),
    FactRow(kind="pci", aspect=_A.PCIE_PATH, what="the bridges above a PCI function", files=(),
            one_witness="the directory chain of /sys/devices is the kernel's only record of the PCIe tree "
            "(NVML's common ancestor checks it between GPUs: nvml-ancestor)"),
    FactRow(kind="host-bridge", aspect=_A.IDENTITY, what="a root complex (domain, bus)",
            one_witness="its directory name under /sys/devices is the only reading"),
    FactRow(kind="host-bridge", aspect=_A.NUMA, what="a root complex's NUMA node", files=_FN_NUMA,
            checks=("root-numa", "pci-numa-cpus"), alone_where=_NUMA_ALONE),
    FactRow(kind="gpu", aspect=_A.IDENTITY, what="a GPU's index, minor, UUID, name, device id, compute "
            "capability, architecture", files=(f"{_DRIVER}/information", *_FN_ID), calls=("nvmlDeviceGetUUID",
            "nvmlDeviceGetMinorNumber", "nvmlDeviceGetName", "nvmlDeviceGetPciInfo_v3",
            "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetArchitecture"),
            checks=("gpu-uuid", "gpu-minor", "gpu-model", "gpu-driver-model", "gpu-pci-identity", "gpu-architecture")),
    FactRow(kind="gpu", aspect=_A.IDENTITY, part="memory", what="a GPU's memory size",
            calls=("nvmlDeviceGetMemoryInfo",), one_witness="NVML's total is the node's only count of a GPU's "
            "memory (no kernel file gives it); a size no GPU has (none, over 4 TiB) is refused"),
    FactRow(kind="gpu", aspect=_A.NUMA, what="a GPU's NUMA node, CPU and memory affinity, its memory's node",
            files=(*_FN_NUMA, f"{_DRIVER}/numa_status"), calls=_AFFINITY,
            checks=("gpu-affinity", "gpu-memory-node", "pci-numa-cpus", "gpu-memory-numa"), alone_where="its "
            "function's numa_node is -1 (a VM's or a firmware's missing proximity: NVML's affinity is then not "
            "compared), as for every PCI function"),
    FactRow(kind="gpu", aspect=_A.NUMA, part="memory nodes", what="the nodes NVML's memory affinity lists "
            "beside the GPU's own", calls=("nvmlDeviceGetMemoryAffinity",), one_witness="the memory-only nodes "
            "near a GPU (GB200's GPU memory partitions) have no other reading; the GPU's own node must be among "
            "them (gpu-affinity)"),
    FactRow(kind="gpu", aspect=_A.PCIE_LINK, what="a GPU's PCIe generation and width", files=_FN_LINK,
            calls=_PCIE_CALLS, checks=("gpu-pcie", "pcie-over-max", "pcie-ends"), alone_where="a port above the "
            "GPU is emulated by a hypervisor (QEMU, VMware): its link files speak for the port, so NVML's reading "
            "stands alone (gpu-pcie's overrule)"),
    FactRow(kind="gpu", aspect=_A.NVLINKS, what="a GPU's NVLinks (ends, count, version)", calls=_NVLINK_CALLS,
            checks=("nvlink-count", "nvlink-ends", "nvlink-version", "nvlink-remote-type", "nvswitch-links")),
    FactRow(kind="gpu", aspect=_A.P2P, what="P2P status and common ancestor between GPUs",
            calls=("nvmlDeviceGetP2PStatus", "nvmlDeviceGetTopologyCommonAncestor"),
            checks=("nvml-p2p-nvlink", "nvml-ancestor")),
    FactRow(kind="gpu", aspect=_A.P2P, part="status", what="P2P status per capability (read, write, atomics, "
            "PCI; NVLink where no check applies)", calls=("nvmlDeviceGetP2PStatus",), one_witness="the driver's "
            "P2P status is its own word on what it allows; only \"OK over NVLink\" has a second reading "
            "(nvml-p2p-nvlink); a status nvml.h does not define is refused"),
    FactRow(kind="gpu", aspect=_A.FABRIC, what="a GPU's NVLink domain (cluster, clique, state)",
            calls=("nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetPlatformInfo"), checks=("fabric", "fabric-domain"),
            alone_where="the GPU's NVLinks reach no NVSwitch and it is no product of a multi-node NVLink domain "
            "(GH200, a PCIe board): nothing else on the node says what its domain is"),
    FactRow(kind="gpu", aspect=_A.MIG, what="a GPU's MIG mode and instances", calls=("nvmlDeviceGetMigMode",
            "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetGpuInstanceId",
            "nvmlDeviceGetComputeInstanceId"), one_witness="NVML is the only reader of MIG state"),
    FactRow(kind="nvswitch", aspect=_A.IDENTITY, what="an NVSwitch (device id, on the bus or not)", files=_FN_ID,
            calls=("nvmlDeviceGetNvLinkRemoteDeviceType",), checks=("nvlink-remote-type",)),
    FactRow(kind="nic", aspect=_A.IDENTITY, what="a NIC (RDMA name, PCI function, netdevs)",
            files=("sys/class/net/*/type",), checks=("nic-function", "rdma-infiniband")),
    FactRow(kind="nic", aspect=_A.NUMA, what="a NIC's NUMA node", files=_FN_NUMA, checks=("pci-numa-cpus",
            "root-numa"), alone_where=_NUMA_ALONE),
    FactRow(kind="nic", aspect=_A.PORTS, what="a NIC's ports (rate, state, link layer; speed, operstate)",
            files=(*_IB_PORT, *_NET), one_witness="a port's attributes are the kernel's only report of the port; "
            "nothing else on the node reads a link's rate or state"),
    FactRow(kind="node", aspect=_A.NUMA, what="NUMA nodes (CPUs, memory, distances), the CPUs online",
            files=(*_NODE_CPUS, f"{_NODE}/distance"), checks=_NUMA_CHECKS),
    FactRow(kind="node", aspect=_A.NUMA, part="memory", what="a NUMA node's memory", files=(f"{_NODE}/meminfo",),
            one_witness="MemTotal of the node's meminfo is the kernel's only count of a node's memory"),
    FactRow(kind="node", aspect=_A.NUMA, part="distance", what="NUMA distances beyond 10 to itself and more to "
            "another", files=(f"{_NODE}/distance",), one_witness="each row is the firmware's SLIT as the kernel "
            "copied it; ACPI allows an asymmetric table, so rows are not compared with each other"),
    FactRow(kind="node", aspect=_A.NUMA, part="online", what="which of a node's CPUs are online",
            files=("sys/devices/system/cpu/online",), one_witness="the online list is the kernel's only reading of "
            "which CPUs run; a node may list CPUs that are offline"),
    FactRow(kind="node", aspect=_A.GPUS, what="which GPUs the node has", files=(*_FN_ID, f"{_DRIVER}/information"),
            calls=("nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetIndex"),
            checks=("driver-gpus", "gpu-pci-identity")),
    FactRow(kind="node", aspect=_A.NICS, what="which NICs the node has", files=_FN_ID,
            checks=("nic-function", "rdma-infiniband")),
    FactRow(kind="node", aspect=_A.PCI, what="which PCI functions the node has", files=_FN_ID,
            checks=("pci-bus-id",)),
    FactRow(kind="node", aspect=_A.GDR, what="GPUDirect RDMA (peermem, memory peers, dma-buf)",
            files=("sys/module/*", "sys/kernel/mm/memory_peers/*"), one_witness="the module's and the kernel's "
            "files are the only record of what is loaded"),
    FactRow(kind="node", aspect=_A.VERSIONS, what="driver, NVML, CUDA and kernel versions",
            files=("proc/driver/nvidia/version", "proc/sys/kernel/osrelease"), calls=(
                "nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion", "nvmlSystemGetCudaDriverVersion"),
            checks=("driver-version", "nvml-version")),
    FactRow(kind="node", aspect=_A.VERSIONS, part="cuda minor", what="the minor of the CUDA version the driver "
            "supports", calls=("nvmlSystemGetCudaDriverVersion",), one_witness="NVML's version carries the CUDA "
            "major only (nvml-version); the minor is nvmlSystemGetCudaDriverVersion's word alone"),
)
# Files discovery reads for no fact of the table: the node's name (a name, not a fact of the hardware).
NAMES_ONLY = ("proc/sys/kernel/hostname",)
# NVML calls that open and close a session: they answer no fact (a failed nvmlInit is the source's failure).
SESSION_CALLS = ("nvmlInitWithFlags", "nvmlShutdown")


@functools.cache
def _pattern(glob: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(glob))


def rows_reading(path: str) -> tuple[FactRow, ...]:
    """The rows whose files name ``path`` (relative to the root, no leading ``/``)."""
    return tuple(r for r in FACT_ROWS if any(_pattern(g).match(path) for g in r.files))


def rows_calling(call: str) -> tuple[FactRow, ...]:
    """The rows whose NVML calls name ``call``."""
    return tuple(r for r in FACT_ROWS if call in r.calls)


@functools.cache
def one_witness(kind: str, aspect: Aspect, part: str = "") -> bool:
    """Whether the table says the fact ``aspect`` (its ``part``) of a ``kind`` has one witness (no row: False)."""
    return any(r.one_witness for r in FACT_ROWS if r.kind == kind and r.aspect is aspect and r.part == part)


def alone_where(kind: str, aspect: Aspect) -> str:
    """Where the row of ``aspect`` of a ``kind`` has nothing to compare ("" everywhere it has)."""
    return next((r.alone_where for r in FACT_ROWS if r.kind == kind and r.aspect is aspect and r.alone_where), "")


def fact_table_markdown() -> str:
    """The reference's facts table, generated from :data:`FACT_ROWS`."""
    lines = ["| entity | fact | files | NVML calls | witnesses | checked by, or why one |", "|---|---|---|---|---|---|"]
    for r in FACT_ROWS:
        files = ", ".join(f"`{f}`" for f in r.files) or "(directory names and links)"
        calls = ", ".join(f"`{c}`" for c in r.calls) or "none"
        why = r.one_witness or ", ".join(f"`{c}`" for c in r.checks) + (
            f"; one witness where {r.alone_where}" if r.alone_where else "")
        fact = f"`{r.aspect.value}`" + (f" ({r.part})" if r.part else "")
        lines.append(f"| {r.kind} | {fact}: {r.what} | {files} | {calls} | {r.witnesses} | {why} |")
    return "\n".join(lines) + "\n"


def unchecked() -> tuple[str, ...]:
    """Checks the table names that the witness table lacks (a test keeps this empty)."""
    return tuple(sorted({c for r in FACT_ROWS for c in r.checks} - BY_KEY.keys()))
