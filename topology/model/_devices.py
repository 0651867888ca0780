"""The devices of one node's topology and the edges between them: frozen, slotted, keyword-only records
(``_record``) with canonical ids. ``_entities`` holds them in a :class:`Snapshot`; see its docstring for the ids."""

from __future__ import annotations

import enum

from ._record import Record

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


class PcieLinkState(Record):
    """PCIe generation and lane count; ``None`` where the kernel or NVML did not say."""

    __slots__ = __match_args__ = ("current_gen", "current_width", "max_gen", "max_width")
    current_gen: int | None
    current_width: int | None
    max_gen: int | None
    max_width: int | None

    def __init__(self, *, current_gen: int | None = None, current_width: int | None = None, max_gen: int | None = None,
                 max_width: int | None = None) -> None:
        self._fill(locals())

    @property
    def downtrained(self) -> bool:
        """Running below what it is capable of (gen or width)."""
        pairs = ((self.current_gen, self.max_gen), (self.current_width, self.max_width))
        return any(now is not None and most is not None and now < most for now, most in pairs)



class HostBridge(Record):
    """A PCIe root complex (the ``pciDDDD:BB`` directory under ``/sys/devices``)."""

    __slots__ = __match_args__ = ("id", "domain", "bus", "numa_node")
    id: str
    domain: int
    bus: int
    numa_node: int | None

    def __init__(self, *, id: str, domain: int, bus: int, numa_node: int | None = None) -> None:
        self._fill(locals())


class PciFunction(Record):
    """One PCI function; ``parent`` is the upstream bridge's bus id, or the host bridge id."""

    __slots__ = __match_args__ = ("id", "parent", "vendor_id", "device_id", "class_code", "numa_node", "local_cpus",
                                  "link", "driver", "acs_enabled")
    id: str
    parent: str
    vendor_id: int
    device_id: int
    class_code: int  # 24-bit: base class, subclass, prog-if
    numa_node: int | None
    local_cpus: tuple[int, ...] | None
    link: PcieLinkState | None
    driver: str | None
    acs_enabled: bool | None  # bridges only: ACS request redirect on (blocks P2P routing)

    def __init__(self, *, id: str, parent: str, vendor_id: int, device_id: int, class_code: int,
                 numa_node: int | None = None, local_cpus: tuple[int, ...] | None = None,
                 link: PcieLinkState | None = None, driver: str | None = None, acs_enabled: bool | None = None) -> None:
        self._fill(locals())

    @property
    def is_bridge(self) -> bool:
        return self.class_code >> 8 == 0x0604

    @property
    def is_gpu(self) -> bool:
        """An NVIDIA VGA-compatible or 3D controller: the functions discovery takes for GPUs."""
        return self.vendor_id == NVIDIA_VENDOR and self.class_code >> 8 in GPU_CLASSES


class NumaNode(Record):
    """A NUMA node: its CPUs and memory."""

    __slots__ = __match_args__ = ("id", "os_index", "cpus", "memory_bytes", "gpu_memory")
    id: str
    os_index: int
    cpus: tuple[int, ...]
    memory_bytes: int | None
    gpu_memory: bool  # the memory of a GPU exposed as a NUMA node (GH200, GB200)

    def __init__(self, *, id: str, os_index: int, cpus: tuple[int, ...], memory_bytes: int | None = None,
                 gpu_memory: bool = False) -> None:
        self._fill(locals())


class MigInstance(Record):
    """A MIG GPU instance (and compute instance) of a GPU."""

    __slots__ = __match_args__ = ("gpu_instance_id", "compute_instance_id", "profile", "uuid", "memory_bytes")
    gpu_instance_id: int
    compute_instance_id: int | None
    profile: str | None
    uuid: str | None
    memory_bytes: int | None

    def __init__(self, *, gpu_instance_id: int, compute_instance_id: int | None = None, profile: str | None = None,
                 uuid: str | None = None, memory_bytes: int | None = None) -> None:
        self._fill(locals())


class PlatformInfo(Record):
    """``nvmlDeviceGetPlatformInfo`` (GB200/GB300): which rack (its chassis serial), slot, tray and host the GPU
    is in, and its module on the tray."""

    __slots__ = __match_args__ = ("chassis_serial", "slot", "tray", "host_id", "peer_type", "module_id")
    chassis_serial: str
    slot: int
    tray: int
    host_id: int
    peer_type: int
    module_id: int

    def __init__(self, *, chassis_serial: str, slot: int, tray: int, host_id: int, peer_type: int,
                 module_id: int) -> None:
        self._fill(locals())


class FabricInfo(Record):
    """The GPU's NVLink fabric registration (``nvmlGpuFabricInfo``)."""

    __slots__ = __match_args__ = ("state", "cluster_uuid", "clique_id", "health_mask")
    state: FabricState
    cluster_uuid: str | None
    clique_id: int | None
    health_mask: int  # nvmlGpuFabricInfo healthMask as NVML wrote it (0: no field supported); see _fabric_health

    def __init__(self, *, state: FabricState, cluster_uuid: str | None = None, clique_id: int | None = None,
                 health_mask: int = 0) -> None:
        self._fill(locals())

    @property
    def clique(self) -> str | None:
        """``<clusterUuid>.<cliqueId>`` as GFD's ``nvidia.com/gpu.clique``, only once the fabric is up."""
        if self.state is not FabricState.COMPLETED or self.cluster_uuid is None or self.clique_id is None:
            return None
        return f"{self.cluster_uuid}.{self.clique_id}"


class Gpu(Record):
    """An NVIDIA GPU, by its PCI bus id."""

    __slots__ = __match_args__ = ("id", "index", "minor", "uuid", "name", "memory_bytes", "pci_device_id", "numa_node",
                                  "cpu_affinity", "memory_affinity", "gpu_numa_id", "mig_enabled", "mig_instances",
                                  "fabric", "platform", "pcie", "compute_capability", "architecture", "lost")
    id: str  # canonical PCI bus id
    index: int | None  # NVML index; None when found by PCI alone
    minor: int | None
    uuid: str | None
    name: str | None
    memory_bytes: int | None
    pci_device_id: int | None
    numa_node: int | None
    cpu_affinity: tuple[int, ...]
    memory_affinity: tuple[int, ...]  # NUMA nodes NVML names as near the GPU (topo -m "NUMA Affinity")
    gpu_numa_id: int | None
    mig_enabled: bool | None
    mig_instances: tuple[MigInstance, ...]
    fabric: FabricInfo | None
    platform: PlatformInfo | None  # None: not a tray that says (or not read)
    pcie: PcieLinkState | None
    compute_capability: tuple[int, int] | None
    architecture: str | None
    lost: bool  # fell off the bus (NVML GPU_IS_LOST): kept in the graph, marked

    def __init__(self, *, id: str, index: int | None = None, minor: int | None = None, uuid: str | None = None,
                 name: str | None = None, memory_bytes: int | None = None, pci_device_id: int | None = None,
                 numa_node: int | None = None, cpu_affinity: tuple[int, ...] = (),
                 memory_affinity: tuple[int, ...] = (), gpu_numa_id: int | None = None, mig_enabled: bool | None = None,
                 mig_instances: tuple[MigInstance, ...] = (), fabric: FabricInfo | None = None,
                 platform: PlatformInfo | None = None, pcie: PcieLinkState | None = None,
                 compute_capability: tuple[int, int] | None = None, architecture: str | None = None,
                 lost: bool = False) -> None:
        self._fill(locals())


class NvSwitch(Record):
    """An NVSwitch chip, on the PCI bus or seen only as NVLink's far end."""

    __slots__ = __match_args__ = ("id", "pci_device_id", "visible_on_pci")
    id: str  # PCI bus id, or ``nvswitch<N>`` when NVML only gave the sentinel remote id
    pci_device_id: int | None
    visible_on_pci: bool

    def __init__(self, *, id: str, pci_device_id: int | None = None, visible_on_pci: bool = True) -> None:
        self._fill(locals())


class NicPort(Record):
    """One port of a NIC."""

    __slots__ = __match_args__ = ("number", "state", "rate_gbps", "link_layer")
    number: int
    state: str | None  # ACTIVE, DOWN, ...
    rate_gbps: float | None
    link_layer: str | None  # InfiniBand, Ethernet

    def __init__(self, *, number: int, state: str | None = None, rate_gbps: float | None = None,
                 link_layer: str | None = None) -> None:
        self._fill(locals())


class Nic(Record):
    """A network adapter: an RDMA device or a network interface."""

    __slots__ = __match_args__ = ("id", "name", "pci_bus_id", "rdma", "netdevs", "numa_node", "ports", "driver")
    id: str
    name: str  # mlx5_0 for an HCA, the interface name otherwise
    pci_bus_id: str | None
    rdma: bool
    netdevs: tuple[str, ...]
    numa_node: int | None
    ports: tuple[NicPort, ...]
    driver: str | None

    def __init__(self, *, id: str, name: str, pci_bus_id: str | None = None, rdma: bool = False,
                 netdevs: tuple[str, ...] = (), numa_node: int | None = None, ports: tuple[NicPort, ...] = (),
                 driver: str | None = None) -> None:
        self._fill(locals())


class Link(Record):
    """An edge of the graph. Rates are per direction, decimal bytes per second, ``theoretical``."""

    __slots__ = __match_args__ = ("a", "b", "kind", "count", "nvlink_version", "pcie", "numa_distance",
                                  "bytes_per_second")
    a: str
    b: str
    kind: LinkKind
    count: int  # bonded NVLinks, or 1
    nvlink_version: int | None  # NVLink generation (1..6), not NVML's enum
    pcie: PcieLinkState | None
    numa_distance: int | None
    bytes_per_second: float | None

    def __init__(self, *, a: str, b: str, kind: LinkKind, count: int = 1, nvlink_version: int | None = None,
                 pcie: PcieLinkState | None = None, numa_distance: int | None = None,
                 bytes_per_second: float | None = None) -> None:
        self._fill(locals())

    @property
    def id(self) -> str:
        return link_id(self.kind, self.a, self.b)


def link_id(kind: LinkKind, a: str, b: str) -> str:
    lo, hi = sorted((a, b))
    return f"{kind.value}:{lo}--{hi}"


class GdrFacts(Record):
    """What GPUDirect RDMA needs from the host, as read (None = could not tell)."""

    __slots__ = __match_args__ = ("peermem_loaded", "memory_peers", "dmabuf_supported")
    peermem_loaded: bool | None
    memory_peers: tuple[str, ...]
    dmabuf_supported: bool | None

    def __init__(self, *, peermem_loaded: bool | None = None, memory_peers: tuple[str, ...] = (),
                 dmabuf_supported: bool | None = None) -> None:
        self._fill(locals())
