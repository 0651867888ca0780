"""Network interfaces from ``/sys/class/net``: which PCI function each sits on, or that it is virtual."""

from __future__ import annotations

from dataclasses import dataclass

from topology import Problem

from .._context import DiscoveryContext
from .._fsroot import FsRoot
from ._registry import register
from ._sysfs import SYSFS_BDF, Reader, device_path, list_subsystem, non_negative

SOURCE = "net"
_CLASS = "/sys/class/net"
_VIRTUAL = "/sys/devices/virtual/"


@dataclass(frozen=True, slots=True, kw_only=True)
class NetIfFacts:
    name: str
    pci_bus_id: str | None = None  # the nearest PCI function below it; None for virtual or non-PCI ones
    virtual: bool = False  # lo, bridges, bonds, VLANs, veth: no device of their own
    operstate: str | None = None  # up, down, unknown, ...
    speed_mbps: int | None = None  # None when the link is down or the driver does not say
    arp_type: int | None = None  # 1 Ethernet, 32 InfiniBand
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class NetFacts:
    interfaces: tuple[NetIfFacts, ...] = ()
    problems: tuple[Problem, ...] = ()


@register(SOURCE, help="network interfaces and their PCI functions (/sys/class/net)")
def read_net(ctx: DiscoveryContext) -> NetFacts:
    root = ctx.root
    names = list_subsystem(root, _CLASS, absent="no /sys/class/net")
    return NetFacts(interfaces=tuple(_read_interface(root, name) for name in names))


def _read_interface(root: FsRoot, name: str) -> NetIfFacts:
    entry = f"{_CLASS}/{name}"
    path = device_path(root, entry)
    if path is None or path.startswith(_VIRTUAL):
        return NetIfFacts(name=name, virtual=True)
    bdf = next((part for part in reversed(path.split("/")) if SYSFS_BDF.match(part)), None)
    r = Reader(root, SOURCE, name, entry)
    operstate = r.text("operstate")
    arp_type = r.parsed("type", non_negative)
    speed = _speed(root, entry)
    return NetIfFacts(name=name, pci_bus_id=bdf, operstate=operstate or None, speed_mbps=speed, arp_type=arp_type,
                      problems=tuple(r.problems))


def _speed(root: FsRoot, entry: str) -> int | None:
    # Reading `speed` of a link that is down fails with EINVAL, and drivers that do not know print -1:
    # both mean "not known", not a problem.
    try:
        text = root.attr(entry, "speed")
    except OSError:
        return None
    try:
        value = int(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None
