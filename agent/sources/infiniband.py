"""RDMA devices from ``/sys/class/infiniband``: the PCI function behind each, its ports and netdevs.

Devices with no PCI function (soft RoCE ``rxe0``, ``siw0``, Xeon Phi ``scif0``) are skipped: they have
no place in the PCIe tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topology import Problem

from .._context import DiscoveryContext
from .._fsroot import FsRoot
from ._registry import register
from ._sysfs import Reader, list_subsystem, pci_function_of

SOURCE = "infiniband"
_CLASS = "/sys/class/infiniband"
_RATE = re.compile(r"^(\d+(?:\.\d+)?) Gb/sec")


@dataclass(frozen=True, slots=True, kw_only=True)
class IbPortFacts:
    number: int
    state: str | None = None  # ACTIVE, DOWN, INIT, ARMED (the kernel's "4: ACTIVE" without the number)
    rate_gbps: float | None = None
    link_layer: str | None = None  # InfiniBand, Ethernet


@dataclass(frozen=True, slots=True, kw_only=True)
class IbDeviceFacts:
    name: str  # mlx5_0
    pci_bus_id: str
    netdevs: tuple[str, ...] = ()
    ports: tuple[IbPortFacts, ...] = ()
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class InfinibandFacts:
    devices: tuple[IbDeviceFacts, ...] = ()
    problems: tuple[Problem, ...] = ()


@register(SOURCE, help="RDMA devices, their ports and PCI functions (/sys/class/infiniband)")
def read_infiniband(ctx: DiscoveryContext) -> InfinibandFacts:
    root = ctx.root
    names = list_subsystem(root, _CLASS, absent="no /sys/class/infiniband (no RDMA driver loaded)")
    devices = []
    for name in names:
        bdf = pci_function_of(root, f"{_CLASS}/{name}")
        if bdf is not None:
            devices.append(_read_device(root, name, bdf))
    return InfinibandFacts(devices=tuple(devices))


def _read_device(root: FsRoot, name: str, bdf: str) -> IbDeviceFacts:
    r = Reader(root, SOURCE, name, f"{_CLASS}/{name}")
    ports = []
    for entry in sorted(r.listdir("ports"), key=lambda e: (not e.isdigit(), int(e) if e.isdigit() else 0, e)):
        if not entry.isdigit():
            r.problem(f"ports/{entry}: not a port number")
            continue
        ports.append(IbPortFacts(
            number=int(entry),
            state=r.parsed(f"ports/{entry}/state", _state),
            rate_gbps=r.parsed(f"ports/{entry}/rate", _rate),
            link_layer=r.text(f"ports/{entry}/link_layer") or None,
        ))
    netdevs = tuple(r.listdir("device/net"))
    return IbDeviceFacts(name=name, pci_bus_id=bdf, netdevs=netdevs, ports=tuple(ports), problems=tuple(r.problems))


def _state(text: str) -> str:
    """``4: ACTIVE`` -> ``ACTIVE``."""
    number, sep, word = text.partition(":")
    if not sep or not number.strip().isdigit() or not word.strip():
        raise ValueError(text)
    return word.strip()


def _rate(text: str) -> float:
    """``200 Gb/sec (4X HDR)`` -> 200.0 (decimal gigabits per second)."""
    m = _RATE.match(text)
    if m is None:
        raise ValueError(text)
    return float(m.group(1))
