"""The entities of one node's topology: frozen, slotted, keyword-only records with canonical ids.

Ids: PCI functions, GPUs and NVSwitches use the lowercase full bus id (``0000:3b:00.0``); host bridges
``pciDDDD:BB`` (the sysfs root-complex directory); NUMA nodes ``numa<N>``; NICs their PCI bus id, or
``net:<ifname>`` for a virtual interface with no PCI function. Links are ``<kind>:<a>--<b>`` with the
endpoints sorted, so the same physical link has one id whichever end saw it.

A :class:`Snapshot` holds these entities beside the numbers on the graph (``_numbers``) and the record of
where facts came from and what could not be read (``_provenance``).
"""

from __future__ import annotations

import enum
import threading
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TypeVar, cast

from ._facts import Fact, Knowledge
from ._measurement import Matrix, Measurement
from ._provenance import Problem, SourceOutcome, SourceStatus

NVIDIA_VENDOR = 0x10DE
GPU_CLASSES = (0x0300, 0x0302)  # PCI class: VGA-compatible, 3D controller


class LinkKind(enum.StrEnum):
    NVLINK = "nvlink"
    PCIE = "pcie"
    C2C = "c2c"
    NUMA = "numa"
    NIC_PORT = "nic-port"


class FabricState(enum.StrEnum):
    NOT_SUPPORTED = "not-supported"
    NOT_STARTED = "not-started"
    IN_PROGRESS = "in-progress"
    COMPLETED = "completed"


@dataclass(frozen=True, slots=True, kw_only=True)
class PcieLinkState:
    """PCIe generation and lane count; ``None`` where the kernel or NVML did not say."""

    current_gen: int | None = None
    current_width: int | None = None
    max_gen: int | None = None
    max_width: int | None = None

    @property
    def downtrained(self) -> bool:
        """Running below what it is capable of (gen or width)."""
        pairs = ((self.current_gen, self.max_gen), (self.current_width, self.max_width))
        return any(now is not None and most is not None and now < most for now, most in pairs)


_WHOLE = frozenset({SourceStatus.OK, SourceStatus.ABSENT})


@dataclass(frozen=True, slots=True, kw_only=True)
class HostBridge:
    """A PCIe root complex (the ``pciDDDD:BB`` directory under ``/sys/devices``)."""

    id: str
    domain: int
    bus: int
    numa_node: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PciFunction:
    """One PCI function; ``parent`` is the upstream bridge's bus id, or the host bridge id."""

    id: str
    parent: str
    vendor_id: int
    device_id: int
    class_code: int  # 24-bit: base class, subclass, prog-if
    numa_node: int | None = None
    local_cpus: tuple[int, ...] | None = None
    link: PcieLinkState | None = None
    driver: str | None = None
    acs_enabled: bool | None = None  # bridges only: ACS request redirect on (blocks P2P routing)

    @property
    def is_bridge(self) -> bool:
        return self.class_code >> 8 == 0x0604

    @property
    def is_gpu(self) -> bool:
        """An NVIDIA VGA-compatible or 3D controller: the functions discovery takes for GPUs."""
        return self.vendor_id == NVIDIA_VENDOR and self.class_code >> 8 in GPU_CLASSES


@dataclass(frozen=True, slots=True, kw_only=True)
class NumaNode:
    """A NUMA node: its CPUs and memory."""

    id: str
    os_index: int
    cpus: tuple[int, ...]
    memory_bytes: int | None = None
    gpu_memory: bool = False  # the memory of a GPU exposed as a NUMA node (GH200, GB200)


@dataclass(frozen=True, slots=True, kw_only=True)
class MigInstance:
    """A MIG GPU instance (and compute instance) of a GPU."""

    gpu_instance_id: int
    compute_instance_id: int | None = None
    profile: str | None = None
    uuid: str | None = None
    memory_bytes: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlatformInfo:
    """``nvmlDeviceGetPlatformInfo`` (GB200/GB300): which rack (its chassis serial), slot, tray and host the GPU
    is in, and its module on the tray."""

    chassis_serial: str
    slot: int
    tray: int
    host_id: int
    peer_type: int
    module_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricInfo:
    """The GPU's NVLink fabric registration (``nvmlGpuFabricInfo``)."""

    state: FabricState
    cluster_uuid: str | None = None
    clique_id: int | None = None
    health_mask: int = 0  # nvmlGpuFabricInfo healthMask as NVML wrote it (0: no field supported); see _fabric_health

    @property
    def clique(self) -> str | None:
        """``<clusterUuid>.<cliqueId>`` as GFD's ``nvidia.com/gpu.clique``, only once the fabric is up."""
        if self.state is not FabricState.COMPLETED or self.cluster_uuid is None or self.clique_id is None:
            return None
        return f"{self.cluster_uuid}.{self.clique_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    """An NVIDIA GPU, by its PCI bus id."""

    id: str  # canonical PCI bus id
    index: int | None = None  # NVML index; None when found by PCI alone
    minor: int | None = None
    uuid: str | None = None
    name: str | None = None
    memory_bytes: int | None = None
    pci_device_id: int | None = None
    numa_node: int | None = None
    cpu_affinity: tuple[int, ...] = ()
    memory_affinity: tuple[int, ...] = ()  # NUMA nodes NVML names as near the GPU (topo -m "NUMA Affinity")
    gpu_numa_id: int | None = None
    mig_enabled: bool | None = None
    mig_instances: tuple[MigInstance, ...] = ()
    fabric: FabricInfo | None = None
    platform: PlatformInfo | None = None  # None: not a tray that says (or not read)
    pcie: PcieLinkState | None = None
    compute_capability: tuple[int, int] | None = None
    architecture: str | None = None
    lost: bool = False  # fell off the bus (NVML GPU_IS_LOST): kept in the graph, marked


@dataclass(frozen=True, slots=True, kw_only=True)
class NvSwitch:
    """An NVSwitch chip, on the PCI bus or seen only as NVLink's far end."""

    id: str  # PCI bus id, or ``nvswitch<N>`` when NVML only gave the sentinel remote id
    pci_device_id: int | None = None
    visible_on_pci: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class NicPort:
    """One port of a NIC."""

    number: int
    state: str | None = None  # ACTIVE, DOWN, ...
    rate_gbps: float | None = None
    link_layer: str | None = None  # InfiniBand, Ethernet


@dataclass(frozen=True, slots=True, kw_only=True)
class Nic:
    """A network adapter: an RDMA device or a network interface."""

    id: str
    name: str  # mlx5_0 for an HCA, the interface name otherwise
    pci_bus_id: str | None = None
    rdma: bool = False
    netdevs: tuple[str, ...] = ()
    numa_node: int | None = None
    ports: tuple[NicPort, ...] = ()
    driver: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """An edge of the graph. Rates are per direction, decimal bytes per second, ``theoretical``."""

    a: str
    b: str
    kind: LinkKind
    count: int = 1  # bonded NVLinks, or 1
    nvlink_version: int | None = None  # NVLink generation (1..6), not NVML's enum
    pcie: PcieLinkState | None = None
    numa_distance: int | None = None
    bytes_per_second: float | None = None

    @property
    def id(self) -> str:
        return link_id(self.kind, self.a, self.b)


def link_id(kind: LinkKind, a: str, b: str) -> str:
    lo, hi = sorted((a, b))
    return f"{kind.value}:{lo}--{hi}"


@dataclass(frozen=True, slots=True, kw_only=True)
class GdrFacts:
    """What GPUDirect RDMA needs from the host, as read (None = could not tell)."""

    peermem_loaded: bool | None = None
    memory_peers: tuple[str, ...] = ()
    dmabuf_supported: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True, weakref_slot=True)  # what is derived from it is kept with it
class Snapshot:
    """One node, frozen. Build new ones with :func:`dataclasses.replace` or :func:`with_measurements`."""

    node: str
    taken_at: float | None = None
    host_bridges: tuple[HostBridge, ...] = ()
    pci: tuple[PciFunction, ...] = ()
    numa_nodes: tuple[NumaNode, ...] = ()
    gpus: tuple[Gpu, ...] = ()
    nvswitches: tuple[NvSwitch, ...] = ()
    nics: tuple[Nic, ...] = ()
    links: tuple[Link, ...] = ()
    matrices: tuple[Matrix, ...] = ()
    measurements: tuple[Measurement, ...] = ()
    gdr: GdrFacts = field(default_factory=GdrFacts)
    versions: tuple[tuple[str, str], ...] = ()
    sources: tuple[SourceOutcome, ...] = ()
    problems: tuple[Problem, ...] = ()

    @property
    def unknown(self) -> frozenset[Fact]:
        """Every fact some problem leaves unknown."""
        return frozenset(f for p in self.problems for f in p.unknown)

    def knowledge(self) -> Knowledge:
        """``knowledge().knows(subject, aspect)``: build once, ask many times."""
        return Knowledge(self.unknown, nics=(n.id for n in self.nics))

    @property
    def complete(self) -> bool:
        """Nothing a ``topo -m`` cell, a label or a metric depends on is unknown. Sinks never delete on less.
        A fact is known only if a source read it: a snapshot no source read is not complete."""
        return bool(self.sources) and not self.unknown and all(o.status in _WHOLE for o in self.sources)

    def matrix(self, name: str) -> Matrix | None:
        return next((m for m in self.matrices if m.name == name), None)


T = TypeVar("T")
_LOCK = threading.RLock()  # a build may ask for another entry of the same snapshot
_BY_SNAPSHOT: dict[int, dict[Hashable, object]] = {}


def per_snapshot(snap: Snapshot, key: Hashable, build: Callable[[], T]) -> T:
    """``build()`` for this snapshot and key, built once, kept by ``snap``'s identity while it lives and shared by
    every view and sink around it; it depends on ``snap`` and ``key`` alone and must not hold ``snap``."""
    entries = _BY_SNAPSHOT.get(id(snap))
    if entries is not None and key in entries:
        return cast(T, entries[key])
    with _LOCK:  # one build per snapshot and key, even when two threads ask at once
        entries = _BY_SNAPSHOT.get(id(snap))
        if entries is None:
            entries = _BY_SNAPSHOT[id(snap)] = {}
            weakref.finalize(snap, _BY_SNAPSHOT.pop, id(snap), None)
        return cast(T, entries[key] if key in entries else entries.setdefault(key, build()))


def kept_snapshots() -> int:
    """How many snapshots have entries now (entries go with their snapshot)."""
    return len(_BY_SNAPSHOT)
