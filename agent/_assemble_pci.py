"""PCI facts into model entities: functions with their NUMA locality, root complexes, GPUs, NVSwitches.

Locality: the kernel's ``numa_node`` when it names a node of this machine; when it says -1 (common on
one-socket and virtual machines), the one node whose CPUs hold all of the function's local CPUs, which
is where hwloc attaches the device too. Otherwise unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topology import (
    Gpu,
    HostBridge,
    NvSwitch,
    PcieLinkState,
    PciFunction,
    Problem,
    pcie_gen_from_gts,
)

from .sources.pci import PciDeviceFacts

NVIDIA = 0x10DE
_GPU_CLASSES = (0x0300, 0x0302)  # VGA-compatible, 3D controller
_NVSWITCH_CLASS = 0x0680  # bridge, other


class NumaPlaces:
    """The machine's NUMA nodes as CPU sets, to place devices whose ``numa_node`` is -1."""

    def __init__(self, node_cpus: Mapping[int, frozenset[int]], online: frozenset[int] | None) -> None:
        self._cpus = {i: c for i, c in node_cpus.items() if c}
        self._known = frozenset(node_cpus)
        self._online = online

    def locate(self, dev: PciDeviceFacts, problems: list[Problem]) -> int | None:
        if dev.numa_node is not None:
            if not self._known or dev.numa_node in self._known:
                return dev.numa_node
            problems.append(Problem(source="pci", subject=dev.bus_id,
                                    message=f"numa_node {dev.numa_node} is not a NUMA node of this machine"))
        if not dev.local_cpus:
            return None
        local = frozenset(dev.local_cpus)
        if self._online is not None:
            local &= self._online
        holders = [i for i, cpus in self._cpus.items() if local and local <= cpus]
        return holders[0] if len(holders) == 1 else None


def link_state(dev: PciDeviceFacts) -> PcieLinkState | None:
    if dev.current_link_gts is None and dev.max_link_gts is None and dev.current_link_width is None \
            and dev.max_link_width is None:
        return None
    return PcieLinkState(
        current_gen=None if dev.current_link_gts is None else pcie_gen_from_gts(dev.current_link_gts),
        current_width=dev.current_link_width,
        max_gen=None if dev.max_link_gts is None else pcie_gen_from_gts(dev.max_link_gts),
        max_width=dev.max_link_width,
    )


def functions(devices: Sequence[PciDeviceFacts], places: NumaPlaces,
              problems: list[Problem]) -> dict[str, PciFunction]:
    """One PciFunction per device, keyed by bus id. Missing ids are 0 (a problem is already recorded)."""
    out: dict[str, PciFunction] = {}
    for dev in devices:
        out[dev.bus_id] = PciFunction(
            id=dev.bus_id,
            parent=dev.parent,
            vendor_id=dev.vendor_id or 0,
            device_id=dev.device_id or 0,
            class_code=dev.class_code or 0,
            numa_node=places.locate(dev, problems),
            local_cpus=dev.local_cpus,
            link=link_state(dev),
            driver=dev.driver,
            acs_enabled=dev.acs_redirect,
        )
    return out


def host_bridges(devices: Sequence[PciDeviceFacts], funcs: Mapping[str, PciFunction]) -> tuple[HostBridge, ...]:
    """Every root complex, with the NUMA node its functions agree on (None when they don't say or differ)."""
    nodes: dict[str, set[int]] = {}
    for dev in devices:
        seen = nodes.setdefault(dev.host_bridge, set())
        numa = funcs[dev.bus_id].numa_node
        if numa is not None:
            seen.add(numa)
    out = []
    for hb, agreed in nodes.items():
        domain, bus = hb.removeprefix("pci").split(":")
        out.append(HostBridge(id=hb, domain=int(domain, 16), bus=int(bus, 16),
                              numa_node=next(iter(agreed)) if len(agreed) == 1 else None))
    return tuple(sorted(out, key=lambda h: (h.domain, h.bus)))


def is_gpu(f: PciFunction) -> bool:
    return f.vendor_id == NVIDIA and f.class_code >> 8 in _GPU_CLASSES


def gpus(funcs: Mapping[str, PciFunction], driver_gpus: Mapping[str, int | None]) -> tuple[Gpu, ...]:
    """NVIDIA GPUs found by PCI, driver or not; also the functions the NVIDIA driver lists as its GPUs
    (their vendor file may be unreadable). ``index`` stays None: only NVML numbers GPUs."""
    out = []
    for bdf, f in funcs.items():
        if not (is_gpu(f) or bdf in driver_gpus):
            continue
        out.append(Gpu(
            id=bdf,
            pci_device_id=f.device_id or None,
            numa_node=f.numa_node,
            cpu_affinity=f.local_cpus or (),
            gpu_numa_id=driver_gpus.get(bdf),
            pcie=f.link,
        ))
    return tuple(out)


def nvswitches(funcs: Mapping[str, PciFunction]) -> tuple[NvSwitch, ...]:
    return tuple(NvSwitch(id=bdf, pci_device_id=f.device_id)
                 for bdf, f in funcs.items() if f.vendor_id == NVIDIA and f.class_code >> 8 == _NVSWITCH_CLASS)
