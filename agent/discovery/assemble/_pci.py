"""PCI facts into model entities: functions with their NUMA locality, root complexes, GPUs, NVSwitches.

Locality, one rule everywhere (paths, the NUMA Affinity column, labels): a function's NUMA node is the
kernel's ``numa_node`` when it names a node of this machine, and none when the kernel says -1 (firmware
gave no proximity). It is never inferred from ``local_cpus``: ``nvidia-smi`` does not either, and prints
``N/A`` in the NUMA Affinity column and ``SYS`` across root complexes for such a device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topology import (
    Aspect,
    Gpu,
    HostBridge,
    NvSwitch,
    PcieLinkState,
    PciFunction,
    Problem,
    facts_of,
    pcie_gen_from_gts,
)

from ..sources._nvidia_proc import DriverGpuFacts
from ..sources.pci import PciDeviceFacts

NVIDIA = 0x10DE
NVML_DRIVERS = (None, "nvidia")  # no driver: the NVIDIA driver may still be loading
_NVSWITCH_CLASS = 0x0680  # bridge, other


class NumaPlaces:
    """The machine's NUMA nodes, to check each device's ``numa_node`` against."""

    def __init__(self, nodes: frozenset[int] | None) -> None:
        self._known = nodes  # None: the NUMA source did not say (its failure is a problem already)

    def locate(self, dev: PciDeviceFacts, problems: list[Problem]) -> int | None:
        if dev.numa_node is None or self._known is None or dev.numa_node in self._known:
            return dev.numa_node
        problems.append(Problem(source="pci", subject=dev.bus_id,
                                message=f"numa_node {dev.numa_node} is not a NUMA node of this machine",
                                unknown=facts_of(dev.bus_id, Aspect.NUMA)))
        return None


def _gen(dev: PciDeviceFacts, name: str, gts: float | None, problems: list[Problem]) -> int | None:
    gen = None if gts is None else pcie_gen_from_gts(gts)
    if gts is not None and gen is None:  # a rate no generation of the physics table has: said, never a null
        problems.append(Problem(source="pci", subject=dev.bus_id, message=f"{name} {gts:g} GT/s: unknown "
                                "generation (no PCIe generation of the physics table runs at it)",
                                unknown=facts_of(dev.bus_id, Aspect.PCIE_LINK)))
    return gen


def link_state(dev: PciDeviceFacts, problems: list[Problem]) -> PcieLinkState | None:
    if dev.current_link_gts is None and dev.max_link_gts is None and dev.current_link_width is None \
            and dev.max_link_width is None:
        return None
    return PcieLinkState(
        current_gen=_gen(dev, "current_link_speed", dev.current_link_gts, problems),
        current_width=dev.current_link_width,
        max_gen=_gen(dev, "max_link_speed", dev.max_link_gts, problems),
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
            link=link_state(dev, problems),
            driver=dev.driver,
            acs_enabled=dev.acs_redirect,
        )
    return out


def unrooted(funcs: Mapping[str, PciFunction], roots: set[str], problems: list[Problem]) -> set[str]:
    """Functions whose chain of parents never reaches a root complex (a cycle, or a parent nobody has):
    their PCIe path is unknown, and said so, instead of being guessed."""
    state: dict[str, bool] = {}  # id -> reaches a root
    for start in funcs:
        chain: list[str] = []
        node: str | None = start
        verdict = False
        while node is not None:
            if node in roots:
                verdict = True
                break
            if node in state:
                verdict = state[node]
                break
            if node in chain or node not in funcs:
                break
            chain.append(node)
            node = funcs[node].parent
        for n in chain:
            state[n] = verdict
    bad = {n for n, ok in state.items() if not ok}
    for n in sorted(bad):
        problems.append(Problem(source="pci", subject=n, message="its chain of parent bridges never reaches a root "
                                "complex (a cycle or a missing bridge): PCIe path unknown",
                                unknown=facts_of(n, Aspect.PCIE_PATH, Aspect.NUMA)))
    _below_unknown(funcs, problems)
    return bad


def _below_unknown(funcs: Mapping[str, PciFunction], problems: list[Problem]) -> None:
    """A function below a bridge whose place is unknown does not know its own path either."""
    unknown = {f.subject for p in problems for f in p.unknown if f.aspect is Aspect.PCIE_PATH}
    if not unknown:
        return
    for bdf, f in funcs.items():
        if bdf in unknown:
            continue
        node, seen = f.parent, {bdf}
        while node in funcs and node not in seen:
            if node in unknown:
                problems.append(Problem(source="pci", subject=bdf, message=f"below {node}, whose place in the PCIe "
                                        "tree is unknown: its own path is unknown too",
                                        unknown=facts_of(bdf, Aspect.PCIE_PATH)))
                break
            seen.add(node)
            node = funcs[node].parent


def host_bridges(devices: Sequence[PciDeviceFacts], funcs: Mapping[str, PciFunction]) -> tuple[HostBridge, ...]:
    """Every root complex, with the NUMA node its functions agree on (None when they don't say or differ)."""
    nodes: dict[str, set[int]] = {}
    for dev in devices:
        if not dev.placed:
            continue  # a placeholder root is no root complex of the machine
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
    return f.is_gpu  # the model's rule, which the reader of a saved snapshot keeps too


def gpus(funcs: Mapping[str, PciFunction], driver_gpus: Mapping[str, DriverGpuFacts],
         problems: list[Problem]) -> tuple[Gpu, ...]:
    """The host's NVIDIA GPUs: those found by PCI that are bound to the ``nvidia`` driver or to none (a driver
    still loading), and the functions the NVIDIA driver lists as its GPUs (their vendor file may be
    unreadable). ``index`` stays None: only NVML numbers GPUs.

    A GPU bound to another driver is no GPU of this host: ``vfio-pci`` hands it to a virtual machine, whose
    own driver reads its NVLinks; ``nouveau`` and stub drivers keep NVIDIA's driver and NVML off it. NVML on
    the host cannot see it and containers here cannot use it, so it stays a PCI function only (as
    ``nvidia-smi`` on the host shows no such GPU), with a note saying why: counting it would publish GPUs
    nobody here can use, and its NVLinks could only be guessed."""
    out = []
    for bdf, f in funcs.items():
        listed = driver_gpus.get(bdf)
        if not (is_gpu(f) or listed is not None):
            continue
        if f.driver not in NVML_DRIVERS and listed is None:
            problems.append(Problem(source="pci", subject=bdf, message=f"NVIDIA GPU bound to {f.driver}, not to "
                                    "the nvidia driver (passed through to a virtual machine, or held by another "
                                    "driver): not a GPU of this host, left out of the GPUs"))
            continue
        if listed is not None and listed.excluded:
            problems.append(Problem(source="pci", subject=bdf, message="NVIDIA GPU the driver excludes from use "
                                    "(GPU Excluded: Yes): not a GPU of this host, left out of the GPUs"))
            continue
        out.append(Gpu(
            id=bdf,
            pci_device_id=f.device_id or None,
            numa_node=f.numa_node,
            cpu_affinity=f.local_cpus or (),
            gpu_numa_id=listed.memory_node if listed else None,
            pcie=f.link,
        ))
    return tuple(out)


def nvswitches(funcs: Mapping[str, PciFunction]) -> tuple[NvSwitch, ...]:
    return tuple(NvSwitch(id=bdf, pci_device_id=f.device_id)
                 for bdf, f in funcs.items() if f.vendor_id == NVIDIA and f.class_code >> 8 == _NVSWITCH_CLASS)
