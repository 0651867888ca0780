"""What the NVML source read: frozen records, one per GPU, per NVLink and per GPU pair.

Values are as NVML gave them, translated only where a sentinel or an encoding would otherwise leak into
the model: bus ids are canonical (``0000:3b:00.0``), the remote id ``FFFFFFFF:FF:FF.0`` becomes
``remote_sentinel=True``, an all-zero fabric cluster UUID becomes ``None``. ``None`` means not read.
"""

from __future__ import annotations

from topology import FabricInfo, MigInstance, PcieLinkState, PlatformInfo, Problem, Record

SOURCE = "nvml"
# nvmlIntNvLinkDeviceType_t
REMOTE_GPU, REMOTE_IBMNPU, REMOTE_SWITCH, REMOTE_UNKNOWN = 0x00, 0x01, 0x02, 0xFF
# nvmlGpuP2PCapsIndex_t, the ones asked for every pair
P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3, "pci": 4}
FIELD_NVLINK_LINK_COUNT = 91
FIELD_NVSWITCH_CONNECTED_LINK_COUNT = 147


class NvLinkFact(Record):
    """One NVLink of a GPU as NVML reports it."""

    __slots__ = __match_args__ = ("link", "active", "version", "remote_type", "remote_bus_id", "remote_sentinel")
    link: int
    active: bool
    version: int | None  # nvmlNvlinkVersion_t as returned (4.0 = 6), not a generation
    remote_type: int | None  # nvmlIntNvLinkDeviceType_t
    remote_bus_id: str | None  # canonical; None when unread or the sentinel
    remote_sentinel: bool  # NVML gave FFFFFFFF:FF:FF.0 (an NVSwitch it does not show on PCI)

    def __init__(self, *, link: int, active: bool, version: int | None = None, remote_type: int | None = None,
                 remote_bus_id: str | None = None, remote_sentinel: bool = False) -> None:
        self._fill(locals())


class NvmlGpuFacts(Record):  # a field named index: a NamedTuple's would hide tuple.index
    """What NVML says of one GPU."""

    __slots__ = __match_args__ = ("index", "bus_id", "uuid", "name", "memory_bytes", "minor", "pci_device_id",
                                  "gpu_numa_id", "cpu_affinity", "memory_affinity", "pcie", "compute_capability",
                                  "architecture", "mig_enabled", "mig_instances", "fabric", "platform", "nvlink_count",
                                  "nvswitch_link_count", "links", "links_end", "lost")
    index: int
    bus_id: str | None
    uuid: str | None
    name: str | None
    memory_bytes: int | None
    minor: int | None
    pci_device_id: int | None  # the device id (upper half of NVML's pciDeviceId)
    gpu_numa_id: int | None  # nvmlDeviceGetNumaNodeId: the GPU's memory as a NUMA node
    cpu_affinity: tuple[int, ...] | None
    memory_affinity: tuple[int, ...] | None  # NUMA nodes (scope NODE)
    pcie: PcieLinkState | None
    compute_capability: tuple[int, int] | None
    architecture: str | None
    mig_enabled: bool | None  # None: MIG not supported
    mig_instances: tuple[MigInstance, ...]
    fabric: FabricInfo | None  # None: no fabric (pre-Hopper, or not read)
    platform: PlatformInfo | None  # None: not a GB200/GB300 tray, or not read
    nvlink_count: int | None  # field 91
    nvswitch_link_count: int | None  # field 147
    links: tuple[NvLinkFact, ...]
    links_end: int | None  # the first link the per-link calls said is past the last; None: not walked
    lost: bool  # NVML said GPU_IS_LOST; nothing more was asked of it

    def __init__(self, *, index: int, bus_id: str | None = None, uuid: str | None = None, name: str | None = None,
                 memory_bytes: int | None = None, minor: int | None = None, pci_device_id: int | None = None,
                 gpu_numa_id: int | None = None, cpu_affinity: tuple[int, ...] | None = None,
                 memory_affinity: tuple[int, ...] | None = None, pcie: PcieLinkState | None = None,
                 compute_capability: tuple[int, int] | None = None, architecture: str | None = None,
                 mig_enabled: bool | None = None, mig_instances: tuple[MigInstance, ...] = (),
                 fabric: FabricInfo | None = None, platform: PlatformInfo | None = None,
                 nvlink_count: int | None = None, nvswitch_link_count: int | None = None,
                 links: tuple[NvLinkFact, ...] = (), links_end: int | None = None, lost: bool = False) -> None:
        self._fill(locals())


class NvmlPairFacts(Record):
    """One unordered pair of GPUs (NVML indices, ``a < b``)."""

    __slots__ = __match_args__ = ("a", "b", "common_ancestor", "p2p")
    a: int
    b: int
    common_ancestor: int | None  # nvmlGpuTopologyLevel_t: 0, 10 PIX, 20 PXB, 30 PHB, 40 NODE, 50 SYS
    p2p: tuple[tuple[int, int], ...]  # (nvmlGpuP2PCapsIndex_t, nvmlGpuP2PStatus_t) as read

    def __init__(self, *, a: int, b: int, common_ancestor: int | None = None,
                 p2p: tuple[tuple[int, int], ...] = ()) -> None:
        self._fill(locals())


class NvmlFacts(Record):
    """What the NVML source read: its GPUs, their pairs and the driver."""

    __slots__ = __match_args__ = ("gpus", "pairs", "driver_version", "nvml_version", "cuda_driver_version", "calls",
                                  "problems")
    gpus: tuple[NvmlGpuFacts, ...]
    pairs: tuple[NvmlPairFacts, ...]
    driver_version: str | None
    nvml_version: str | None
    cuda_driver_version: str | None  # "12.8"
    calls: int  # NVML calls this discovery made, nvmlInit included (nvmlShutdown comes after)
    problems: tuple[Problem, ...]

    def __init__(self, *, gpus: tuple[NvmlGpuFacts, ...] = (), pairs: tuple[NvmlPairFacts, ...] = (),
                 driver_version: str | None = None, nvml_version: str | None = None,
                 cuda_driver_version: str | None = None, calls: int = 0, problems: tuple[Problem, ...] = ()) -> None:
        self._fill(locals())
