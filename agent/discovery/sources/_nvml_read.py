"""Walking NVML through the port: every call once, every failure a problem, lost GPUs left alone.

Order: system versions and GPU count, then per GPU (handle, PCI info first so problems name the bus id,
identity, locality, PCIe, MIG, fabric, field values 91/147, NVLinks until INVALID_ARGUMENT), then per
unordered pair (common ancestor, P2P status per caps index). Calls: 5 + G x (18 + one state call per link
and the INVALID_ARGUMENT one + 3 per active link) + 6 x G(G-1)/2, that is O(G^2 + G x L), none repeated
(8x H100 over NVSwitch: 901).

NOT_SUPPORTED from a call that only some hardware answers (GPU NUMA id, fabric, MIG mode, NVLink on a
GPU without it, a field that does not apply) means the feature is absent and is not a problem; from any
other call it is. GPU_IS_LOST marks the GPU lost and stops all calls to it; when a pair call says it,
one ``nvmlDeviceGetIndex`` on each GPU of the pair (never asked otherwise) tells which one fell off.
"""

from __future__ import annotations

from topology import (
    SNAPSHOT_LIMITS,
    Aspect,
    BadPciAddress,
    FabricInfo,
    FabricState,
    MigInstance,
    PcieLinkState,
    PlatformInfo,
    canonical_bdf,
    replace,
)

from ..access import NvmlError, NvmlGpuLost, NvmlInvalidArgument, NvmlNotFound, NvmlNotSupported
from ..access._nvml_port import Handle, NvmlPort
from ._nvml_facts import (
    FIELD_NVLINK_LINK_COUNT,
    FIELD_NVSWITCH_CONNECTED_LINK_COUNT,
    NvLinkFact,
    NvmlFacts,
    NvmlGpuFacts,
)
from ._nvml_pairs import pair_facts
from ._nvml_walk import Walk
from ._registry import too_many

SENTINEL_DOMAIN = "FFFFFFFF"
# Estimate: 4 TiB, over any GPU's memory announced (GB300: 288 GB; Rubin Ultra: 1 TB HBM4e); none has none.
MAX_GPU_MEMORY = 1 << 42
_ARCH = {2: "kepler", 3: "maxwell", 4: "pascal", 5: "volta", 6: "turing", 7: "ampere", 8: "ada", 9: "hopper",
         10: "blackwell", 13: "rubin"}
_FABRIC = {0: FabricState.NOT_SUPPORTED, 1: FabricState.NOT_STARTED, 2: FabricState.IN_PROGRESS,
           3: FabricState.COMPLETED}


def collect(port: NvmlPort) -> NvmlFacts:
    w = Walk(port)
    driver = w.ask(None, Aspect.VERSIONS, port.driver_version)
    nvml = w.ask(None, Aspect.VERSIONS, port.nvml_version)
    cuda = w.ask(None, Aspect.VERSIONS, port.cuda_driver_version)
    count = w.ask(None, Aspect.GPUS, port.device_count) or 0
    too_many("nvmlDeviceGetCount: GPUs", count, SNAPSHOT_LIMITS["gpus"])  # pairs are asked too: square work
    handles: dict[int, Handle] = {}
    gpus = [_gpu(w, i, handles) for i in range(count)]
    pairs = [pair_facts(w, handles, a, b) for a in range(count) for b in range(a + 1, count)
             if a in handles and b in handles]
    gpus = [_with_lost(g, g.index in w.lost) for g in gpus]
    _same_model_disagrees(w, gpus)
    cuda_text = None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}"
    return NvmlFacts(gpus=tuple(gpus), pairs=tuple(p for p in pairs if p is not None), driver_version=driver,
                     nvml_version=nvml, cuda_driver_version=cuda_text, calls=port.calls, problems=tuple(w.problems))


def _same_model_disagrees(w: Walk, gpus: list[NvmlGpuFacts]) -> None:
    """NOT_SUPPORTED from an optional call means the hardware lacks the feature, unless a GPU of the same
    model answered it: then this GPU's answer is a fault, and the feature's state on it is unknown."""
    optional = ((Aspect.MIG, "mig_enabled"), (Aspect.FABRIC, "fabric"), (Aspect.NUMA, "gpu_numa_id"))
    for aspect, field in optional:
        answered = {g.name for g in gpus if g.name is not None and getattr(g, field) is not None}
        for g in gpus:
            if not g.lost and g.name in answered and getattr(g, field) is None:
                w.gpu_problem(g.index, f"{field.replace('_', ' ')}: not supported here, yet another {g.name} "
                                       "answers it", aspect)


def _with_lost(g: NvmlGpuFacts, lost: bool) -> NvmlGpuFacts:
    return g if lost == g.lost else replace(g, lost=lost)


def _gpu(w: Walk, i: int, handles: dict[int, Handle]) -> NvmlGpuFacts:
    port = w.port
    h = w.ask(i, Aspect.ALL, port.handle, i)
    if h is None:
        return NvmlGpuFacts(index=i, lost=i in w.lost)
    handles[i] = h
    pci = w.ask(i, Aspect.ALL, port.pci, h)
    bus_id = device_id = None
    if pci is not None:
        device_id = pci[1] >> 16
        try:
            bus_id = canonical_bdf(pci[0])
            w.subjects[i] = bus_id
        except BadPciAddress:
            w.gpu_problem(i, f"nvmlDeviceGetPciInfo_v3: bus id {pci[0]!r} does not parse", Aspect.ALL)
    uuid = w.ask(i, Aspect.IDENTITY, port.uuid, h)
    name = w.ask(i, Aspect.IDENTITY, port.name, h)
    memory = w.ask(i, Aspect.IDENTITY, port.memory_total, h)
    if memory is not None and not 0 < memory <= MAX_GPU_MEMORY:
        w.gpu_problem(i, f"nvmlDeviceGetMemoryInfo: {memory} bytes of memory, which no GPU has", Aspect.IDENTITY)
        memory = None
    minor = w.ask(i, Aspect.IDENTITY, port.minor, h)
    gpu_numa_id = w.ask(i, Aspect.NUMA, port.numa_node_id, h, optional=True)
    cpus = w.ask(i, Aspect.NUMA, port.cpu_affinity, h)
    nodes = w.ask(i, Aspect.NUMA, port.memory_affinity, h)
    pcie = _pcie(w, i, h)
    cc = w.ask(i, Aspect.IDENTITY, port.compute_capability, h)
    arch = w.ask(i, Aspect.IDENTITY, port.architecture, h)
    mig_enabled, migs = _mig(w, i, h)
    fabric = _fabric(w, i, h)
    platform = _platform(w, i, h)
    links, links_end, nvlink_count, switch_count = _links_and_fields(w, i, h)
    return NvmlGpuFacts(
        index=i, bus_id=bus_id, uuid=uuid, name=name, memory_bytes=memory, minor=minor, pci_device_id=device_id,
        gpu_numa_id=gpu_numa_id, cpu_affinity=cpus, memory_affinity=nodes, pcie=pcie, compute_capability=cc,
        architecture=None if arch is None else _ARCH.get(arch, f"unknown({arch})"),
        mig_enabled=mig_enabled, mig_instances=migs, fabric=fabric, platform=platform,
        nvlink_count=nvlink_count, nvswitch_link_count=switch_count, links=links, links_end=links_end,
    )


def _pcie(w: Walk, i: int, h: Handle) -> PcieLinkState | None:
    port = w.port
    values = tuple(w.ask(i, Aspect.PCIE_LINK, fn, h)
                   for fn in (port.pcie_current_gen, port.pcie_current_width, port.pcie_max_gen, port.pcie_max_width))
    if all(v is None for v in values):
        return None
    return PcieLinkState(current_gen=values[0], current_width=values[1], max_gen=values[2], max_width=values[3])


def _mig(w: Walk, i: int, h: Handle) -> tuple[bool | None, tuple[MigInstance, ...]]:
    port = w.port
    mode = w.ask(i, Aspect.MIG, port.mig_mode, h, optional=True)
    if mode is None or not mode[0]:
        return (None if mode is None else False), ()
    slots = w.ask(i, Aspect.MIG, port.max_mig_devices, h) or 0
    out = []
    for slot in range(slots):
        if i in w.lost:
            break
        try:
            m = port.mig_device(h, slot)
        except NvmlNotFound:
            continue  # an empty slot
        except NvmlGpuLost as exc:
            w.mark_lost(i, exc)
            break
        except NvmlError as exc:
            w.gpu_problem(i, f"{exc} (MIG slot {slot})", Aspect.MIG)
            continue
        gi = w.ask(i, Aspect.MIG, port.gpu_instance_id, m)
        if gi is None:
            continue
        ci = w.ask(i, Aspect.MIG, port.compute_instance_id, m)
        name = w.ask(i, Aspect.MIG, port.name, m)
        out.append(MigInstance(
            gpu_instance_id=gi,
            compute_instance_id=ci,
            profile=name.rpartition(" MIG ")[2] if name and " MIG " in name else None,
            uuid=w.ask(i, Aspect.MIG, port.uuid, m),
            memory_bytes=w.ask(i, Aspect.MIG, port.memory_total, m),
        ))
    return True, tuple(out)


def _fabric(w: Walk, i: int, h: Handle) -> FabricInfo | None:
    raw = w.ask(i, Aspect.FABRIC, w.port.fabric, h, optional=True)
    if raw is None:
        return None
    state = _FABRIC.get(raw.state)
    if state is None:
        w.gpu_problem(i, f"nvmlDeviceGetGpuFabricInfoV: unknown fabric state {raw.state}", Aspect.FABRIC)
        return None
    if raw.status != 0 and state is FabricState.COMPLETED:
        w.gpu_problem(i, f"nvmlDeviceGetGpuFabricInfoV: fabric probe status NVML error {raw.status}",
                      Aspect.FABRIC)
    cluster = None if not any(raw.cluster_uuid) else _uuid_text(bytes(raw.cluster_uuid[:16]))
    return FabricInfo(state=state, cluster_uuid=cluster, clique_id=raw.clique_id, health_mask=raw.health_mask)


def _platform(w: Walk, i: int, h: Handle) -> PlatformInfo | None:
    """The tray's platform info; NOT_SUPPORTED (not a GB200/GB300 tray) is None; any other failure a problem on
    the fabric facts, which it belongs with (a rack identity unread is unknown, never taken as none)."""
    raw = w.ask(i, Aspect.FABRIC, w.port.platform, h, optional=True)
    if raw is None:
        return None
    serial = raw.chassis_serial
    if not serial:
        w.gpu_problem(i, "nvmlDeviceGetPlatformInfo: no chassis serial number", Aspect.FABRIC)
        return None
    return PlatformInfo(chassis_serial=serial, slot=raw.slot, tray=raw.tray, host_id=raw.host_id,
                        peer_type=raw.peer_type, module_id=raw.module_id)


def _links_and_fields(w: Walk, i: int, h: Handle
                      ) -> tuple[tuple[NvLinkFact, ...], int | None, int | None, int | None]:
    """The links, where the per-link calls ended (INVALID_ARGUMENT, or NOT_SUPPORTED at link 0: checked
    against field 91 in assembly, as an error before the last link is no end) and fields 91 and 147."""
    port = w.port
    wanted = (FIELD_NVLINK_LINK_COUNT, FIELD_NVSWITCH_CONNECTED_LINK_COUNT)
    fields = w.ask(i, Aspect.NVLINKS, port.field_values, h, wanted, optional=True) or ()
    values: dict[int, int] = {}
    for f in fields:
        if f.code == 0:
            values[f.field_id] = f.value
        elif f.code != 3:  # NOT_SUPPORTED: the field does not apply to this GPU
            w.gpu_problem(i, f"nvmlDeviceGetFieldValues: field {f.field_id}: NVML error {f.code}", Aspect.NVLINKS)
    links = []
    end: int | None = port.max_links
    for link in range(port.max_links):
        if i in w.lost:
            end = None
            break
        try:
            active = port.nvlink_active(h, link)
        except NvmlInvalidArgument:
            end = link  # past the GPU's last link, unless field 91 says otherwise
            break
        except NvmlNotSupported as exc:
            if link == 0:
                end = 0  # no NVLink on this GPU, unless field 91 says otherwise
                break
            w.gpu_problem(i, f"{exc} (link {link})", Aspect.NVLINKS)
            continue
        except NvmlGpuLost as exc:
            w.mark_lost(i, exc)
            end = None
            break
        except NvmlError as exc:
            w.gpu_problem(i, f"{exc} (link {link})", Aspect.NVLINKS)
            continue
        links.append(_link(w, i, h, link) if active else NvLinkFact(link=link, active=False))
    return (tuple(links), end, values.get(FIELD_NVLINK_LINK_COUNT), values.get(FIELD_NVSWITCH_CONNECTED_LINK_COUNT))


def _link(w: Walk, i: int, h: Handle, link: int) -> NvLinkFact:
    port = w.port
    version = w.ask(i, Aspect.NVLINKS, port.nvlink_version, h, link)
    rtype = w.ask(i, Aspect.NVLINKS, port.nvlink_remote_type, h, link)
    remote = w.ask(i, Aspect.NVLINKS, port.nvlink_remote_bus_id, h, link)
    sentinel = remote is not None and remote.upper().startswith(SENTINEL_DOMAIN + ":")
    bus_id = None
    if remote is not None and not sentinel:
        try:
            bus_id = w.bus_id(remote)
        except BadPciAddress:
            w.gpu_problem(i, f"nvmlDeviceGetNvLinkRemotePciInfo_v2: link {link}: bus id {remote!r} does not parse",
                          Aspect.NVLINKS)
    return NvLinkFact(link=link, active=True, version=version, remote_type=rtype, remote_bus_id=bus_id,
                      remote_sentinel=sentinel)


def _uuid_text(raw: bytes) -> str:
    """RFC 4122 text of 16 bytes, as ``str(uuid.UUID(bytes=raw))`` (the uuid module loads platform: ~4 ms)."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
