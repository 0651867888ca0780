"""RDMA devices from ``/sys/class/infiniband``: the PCI function behind each, its ports and netdevs.

Devices with no PCI function (soft RoCE ``rxe0``, ``siw0``, Xeon Phi ``scif0``) are skipped: they have
no place in the PCIe tree.
"""

from __future__ import annotations

import re

from topology import Aspect, Problem, Record, node_fact

from ..access import DiscoveryContext, FsRoot
from ._parse import decimal
from ._registry import register
from ._sysfs import Reader, class_entries, pci_function_in, sysfs_bdf

SOURCE = "infiniband"
_VIRTUAL = "/sys/devices/virtual/"
_CLASS = "/sys/class/infiniband"
# patterns, not compiled: re compiles (and caches) them on first use, which a node without RDMA never reaches
_RATE = r"^([0-9]{1,6}(?:\.[0-9]{1,3})?) Gb/sec"
_PORT = r"^[0-9]{1,3}$"
_PORTS = (Aspect.PORTS,)


class IbPortFacts(Record):
    """One port of an RDMA device."""

    __slots__ = __match_args__ = ("number", "state", "rate_gbps", "link_layer")
    number: int
    state: str | None  # ACTIVE, DOWN, INIT, ARMED (the kernel's "4: ACTIVE" without the number)
    rate_gbps: float | None
    link_layer: str | None  # InfiniBand, Ethernet

    def __init__(self, *, number: int, state: str | None = None, rate_gbps: float | None = None,
                 link_layer: str | None = None) -> None:
        self._fill(locals())


class IbDeviceFacts(Record):
    """One RDMA device: its PCI function, network interfaces and ports."""

    __slots__ = __match_args__ = ("name", "pci_bus_id", "netdevs", "ports", "problems")
    name: str  # mlx5_0
    pci_bus_id: str
    netdevs: tuple[str, ...]
    ports: tuple[IbPortFacts, ...]
    problems: tuple[Problem, ...]

    def __init__(self, *, name: str, pci_bus_id: str, netdevs: tuple[str, ...] = (),
                 ports: tuple[IbPortFacts, ...] = (), problems: tuple[Problem, ...] = ()) -> None:
        self._fill(locals())


class InfinibandFacts(Record):
    """What the infiniband source read."""

    __slots__ = __match_args__ = ("devices", "problems")
    devices: tuple[IbDeviceFacts, ...]
    problems: tuple[Problem, ...]

    def __init__(self, *, devices: tuple[IbDeviceFacts, ...] = (), problems: tuple[Problem, ...] = ()) -> None:
        self._fill(locals())


@register(SOURCE, covers=(Aspect.NICS,), help="RDMA devices, their ports and PCI functions (/sys/class/infiniband)")
def read_infiniband(ctx: DiscoveryContext) -> InfinibandFacts:
    root = ctx.root
    entries, problems = class_entries(root, SOURCE, _CLASS, absent="no /sys/class/infiniband (no RDMA driver loaded)",
                                      most="nics")
    devices = []
    for name, entry, path in entries:
        bdf = pci_function_in(path)  # the entry's link, read once by class_entries
        if bdf is not None:
            devices.append(_read_device(root, name, bdf))
        elif path is not None and not path.startswith(_VIRTUAL):
            problems.append(Problem(source=SOURCE, subject=name, message=f"{entry} points to {path}: neither a PCI "
                                    "function nor a virtual device (soft RoCE)", unknown=(node_fact(Aspect.NICS),)))
    return InfinibandFacts(devices=tuple(devices), problems=tuple(problems))


def _read_device(root: FsRoot, name: str, bdf: str) -> IbDeviceFacts:
    r = Reader(root, SOURCE, name, f"{_CLASS}/{name}", fact_subject=bdf)
    ports = []
    entries = r.listdir("ports", _PORTS)
    if not entries and not root.is_dir(f"{_CLASS}/{name}/ports"):
        r.problem("ports: missing (every RDMA device has one)", _PORTS)
    for entry in sorted(entries, key=lambda e: (not re.match(_PORT, e), len(e), e)):
        if not re.match(_PORT, entry):
            r.problem(f"ports/{entry[:40]!r}: not a port number", _PORTS)
            continue
        ports.append(IbPortFacts(
            number=int(entry),
            state=r.parsed(f"ports/{entry}/state", _state, _PORTS, required=True),
            rate_gbps=r.parsed(f"ports/{entry}/rate", _rate, _PORTS, required=True),
            link_layer=_link_layer(r.text(f"ports/{entry}/link_layer", _PORTS, required=True), r),
        ))
    if not sysfs_bdf(root.realpath(f"{_CLASS}/{name}/device").rsplit("/", 1)[-1]):
        r.problem("device: not a link to the device's directory: its network interfaces are unknown",
                  (Aspect.IDENTITY,))
    netdevs = tuple(n for n in r.listdir("device/net", _PORTS) if n.isprintable() and len(n) <= 15)
    return IbDeviceFacts(name=name, pci_bus_id=bdf, netdevs=netdevs, ports=tuple(ports), problems=tuple(r.problems))


_STATE = r"^[0-9]{1,2}: ([A-Z_]{1,16})$"
_LINK_LAYERS = ("InfiniBand", "Ethernet", "Unknown")


def _state(text: str) -> str:
    """``4: ACTIVE`` -> ``ACTIVE``."""
    m = re.match(_STATE, text)
    if m is None:
        raise ValueError(text)
    decimal(text.partition(":")[0])
    return m.group(1)


def _link_layer(text: str | None, r: Reader) -> str | None:
    if not text:
        return None
    if text not in _LINK_LAYERS:
        r.problem(f"link_layer: unexpected {text[:40]!r}", _PORTS)
        return None
    return text


def _rate(text: str) -> float:
    """``200 Gb/sec (4X HDR)`` -> 200.0 (decimal gigabits per second)."""
    m = re.match(_RATE, text)
    if m is None:
        raise ValueError(text)
    return float(m.group(1))
