"""Network interfaces from ``/sys/class/net``: which PCI function each sits on, or that it is virtual."""

from __future__ import annotations

from topology import SNAPSHOT_LIMITS, Aspect, Problem, Record

from ..access import DiscoveryContext, FsRoot
from ._parse import bounded, decimal
from ._registry import register, too_many
from ._sysfs import Reader, class_entries, pci_function_in

SOURCE = "net"
_CLASS = "/sys/class/net"
_VIRTUAL = "/sys/devices/virtual/"


class NetIfFacts(Record):
    """One network interface."""

    __slots__ = __match_args__ = ("name", "pci_bus_id", "virtual", "operstate", "speed_mbps", "arp_type", "problems")
    name: str
    pci_bus_id: str | None  # the nearest PCI function below it; None for virtual or non-PCI ones
    virtual: bool  # lo, bridges, bonds, VLANs, veth: no device of their own
    operstate: str | None  # up, down, unknown, ...
    speed_mbps: int | None  # None when the link is down or the driver does not say
    arp_type: int | None  # 1 Ethernet, 32 InfiniBand
    problems: tuple[Problem, ...]

    def __init__(self, *, name: str, pci_bus_id: str | None = None, virtual: bool = False, operstate: str | None = None,
                 speed_mbps: int | None = None, arp_type: int | None = None,
                 problems: tuple[Problem, ...] = ()) -> None:
        self._fill(locals())


class NetFacts(Record):
    """What the net source read."""

    __slots__ = __match_args__ = ("interfaces", "problems")
    interfaces: tuple[NetIfFacts, ...]
    problems: tuple[Problem, ...]

    def __init__(self, *, interfaces: tuple[NetIfFacts, ...] = (), problems: tuple[Problem, ...] = ()) -> None:
        self._fill(locals())


_PORTS = (Aspect.PORTS,)
_OPERSTATES = ("up", "down", "unknown", "dormant", "notpresent", "lowerlayerdown", "testing")


@register(SOURCE, covers=(Aspect.NICS,), help="network interfaces and their PCI functions (/sys/class/net)")
def read_net(ctx: DiscoveryContext) -> NetFacts:
    root = ctx.root
    entries, problems = class_entries(root, SOURCE, _CLASS, absent="no /sys/class/net")
    interfaces = [_read_interface(root, name, entry, path) for name, entry, path in entries]
    on_pci = sum(not i.virtual for i in interfaces)
    too_many(f"{_CLASS}: interfaces on PCI functions", on_pci, SNAPSHOT_LIMITS["nics"])
    return NetFacts(interfaces=tuple(interfaces), problems=tuple(problems))


def _read_interface(root: FsRoot, name: str, entry: str, path: str | None) -> NetIfFacts:
    if path is None or path.startswith(_VIRTUAL):
        return NetIfFacts(name=name, virtual=True)
    bdf = pci_function_in(path)
    r = Reader(root, SOURCE, name, entry, fact_subject=bdf or f"net:{name}")
    operstate = r.text("operstate", _PORTS, required=True)
    if operstate is not None and operstate not in _OPERSTATES:
        r.problem(f"operstate: unexpected {operstate[:40]!r}", _PORTS)
        operstate = None
    arp_type = r.parsed("type", bounded(0, 0xFFFF), _PORTS)
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
        value = decimal(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and 0 < value <= 10_000_000 else None
