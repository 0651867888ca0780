"""The PCIe tree of a profile: bus numbers, bridges and switches, as the kernel would enumerate them.

A profile lists host bridges; each child of a host bridge sits behind its own root port, each child of a
``switch`` behind its own downstream port. Bus numbers are handed out depth first, the way firmware does,
except where a node names its ``bus`` (firmware often leaves gaps for hot-plug): then the bridge above it
gets that secondary bus, which must not go backwards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._catalog import CLASS_HOST_BRIDGE, CLASS_PCI_BRIDGE, PLATFORMS

ENDPOINT_KINDS = ("gpu", "nic", "nvswitch", "device")


class ProfileError(ValueError):
    """A machine profile that does not describe a machine."""


@dataclass(frozen=True)
class Function:
    """One PCI function of the generated machine."""

    bdf: str
    parent: str  # the upstream bridge's bus id, or the host bridge id ``pciDDDD:BB``
    kind: str  # host-bridge | root-port | upstream-port | downstream-port | gpu | nic | nvswitch | device
    vendor: int
    device: int
    class_code: int
    numa: int  # -1: the kernel does not know
    link: tuple[int, int, int, int] | None = None  # current gen, width, max gen, max width
    switch: str | None = None  # bridges: the switch (upstream port bdf) or root port this port belongs to
    secondary: int | None = None  # bridges: the bus behind them
    subordinate: int | None = None
    acs_redirect: bool | None = None  # bridges: ACS P2P request redirect in config space; None: not readable
    spec: Mapping[str, Any] = field(default_factory=dict)  # endpoints: the profile's attributes


@dataclass(frozen=True)
class HostBridge:
    id: str
    domain: int
    bus: int
    numa: int


@dataclass
class _Cursor:
    domain: int
    next_bus: int
    numa: int
    gen: int
    acs: bool | None


def _bdf(domain: int, bus: int, dev: int, fn: int) -> str:
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn}"


def _kind_of(node: Mapping[str, Any], where: str) -> str:
    kinds = [k for k in (*ENDPOINT_KINDS, "switch") if k in node]
    if len(kinds) != 1:
        raise ProfileError(f"{where}: a node has exactly one of {', '.join((*ENDPOINT_KINDS, 'switch'))}")
    return kinds[0]


def _wanted_bus(node: Mapping[str, Any], cur: _Cursor, where: str) -> int:
    bus = node.get("bus")
    if bus is None:
        bus = cur.next_bus
    if not isinstance(bus, int) or bus < cur.next_bus or bus > 0xFF:
        raise ProfileError(f"{where}: bus {bus!r} must be an integer from {cur.next_bus:#04x} to 0xff")
    cur.next_bus = bus + 1
    return bus


class TreeBuilder:
    def __init__(self, defaults: Mapping[str, Mapping[str, Any]]) -> None:
        self._defaults = defaults
        self.functions: list[Function] = []
        self.host_bridges: list[HostBridge] = []

    def add_host_bridge(self, spec: Mapping[str, Any], platform: str, where: str) -> None:
        text = str(spec.get("host_bridge", ""))
        try:
            dom_text, bus_text = text.split(":")
            domain, bus = int(dom_text, 16), int(bus_text, 16)
        except ValueError as exc:
            raise ProfileError(f"{where}: host_bridge must be 'DDDD:BB', not {text!r}") from exc
        numa = int(spec.get("numa", -1))
        hb = HostBridge(id=f"pci{domain:04x}:{bus:02x}", domain=domain, bus=bus, numa=numa)
        if any(h.id == hb.id for h in self.host_bridges):
            raise ProfileError(f"{where}: host bridge {hb.id} listed twice")
        self.host_bridges.append(hb)
        host_fn, port_ids, port_fn, first_dev = PLATFORMS[spec.get("platform", platform)]
        if host_fn is not None:
            self.functions.append(Function(bdf=_bdf(domain, bus, 0, 0), parent=hb.id, kind="host-bridge",
                                           vendor=host_fn[0], device=host_fn[1], class_code=CLASS_HOST_BRIDGE,
                                           numa=numa))
        acs = spec.get("acs")
        cur = _Cursor(domain=domain, next_bus=bus + 1, numa=numa, gen=int(spec.get("gen", 4)),
                      acs=None if acs is None else bool(acs))
        for i, child in enumerate(spec.get("children") or ()):
            cw = f"{where}.children[{i}]"
            dev, fn = first_dev + i, port_fn
            if "slot" in child:
                dev_text, fn_text = str(child["slot"]).split(".")
                dev, fn = int(dev_text, 16), int(fn_text)
            port_bdf = _bdf(domain, bus, dev, fn)
            self._bridge_and_child(port_bdf, hb.id, kind="root-port", switch=port_bdf, ids=port_ids, child=child,
                                   cur=cur, where=cw)

    def _bridge_and_child(self, bdf: str, parent: str, *, kind: str, switch: str, ids: tuple[int, int],
                          child: Mapping[str, Any], cur: _Cursor, where: str) -> None:
        index = len(self.functions)
        self.functions.append(Function(bdf=bdf, parent=parent, kind=kind, vendor=ids[0], device=ids[1],
                                       class_code=CLASS_PCI_BRIDGE, numa=cur.numa, switch=switch,
                                       acs_redirect=cur.acs))
        secondary = _wanted_bus(child, cur, where)
        gen, width = self._node(child, bdf, secondary, cur, where)
        subordinate = cur.next_bus - 1
        old = self.functions[index]
        self.functions[index] = Function(**{**old.__dict__, "secondary": secondary, "subordinate": subordinate,
                                            "link": (gen, width, gen, width)})

    def _node(self, node: Mapping[str, Any], parent: str, bus: int, cur: _Cursor,
              where: str) -> tuple[int, int]:
        """Adds the node below ``parent`` on ``bus``; returns the link (gen, width) of its upstream side."""
        kind = _kind_of(node, where)
        if kind == "switch":
            return self._switch(node, parent, bus, cur, where)
        body = node[kind]
        functions = body if isinstance(body, list) else [body or {}]
        gen = width = 0
        for fn, attrs in enumerate(functions):
            spec = {**self._defaults.get(kind, {}), **(attrs or {})}
            numa = int(node.get("numa_node", spec.get("numa_node", cur.numa)))
            max_gen, max_width = int(spec.get("gen", cur.gen)), int(spec.get("width", 16))
            link = (int(spec.get("current_gen", max_gen)), int(spec.get("current_width", max_width)),
                    max_gen, max_width)
            gen, width = max(gen, link[0]), max(width, link[1])
            vendor = int(spec.get("vendor", 0x10DE))
            self.functions.append(Function(bdf=_bdf(cur.domain, bus, 0, fn), parent=parent, kind=kind,
                                           vendor=vendor, device=int(spec["device_id"]),
                                           class_code=int(spec["class"]), numa=numa, link=link, spec=spec))
        return gen, width

    def _switch(self, node: Mapping[str, Any], parent: str, bus: int, cur: _Cursor,
                where: str) -> tuple[int, int]:
        ids = tuple(self._defaults.get("switch", {}).get("ids", (0x10B5, 0x9797)))
        up_bdf = _bdf(cur.domain, bus, 0, 0)
        up_index = len(self.functions)
        self.functions.append(Function(bdf=up_bdf, parent=parent, kind="upstream-port", vendor=ids[0],
                                       device=ids[1], class_code=CLASS_PCI_BRIDGE, numa=cur.numa,
                                       switch=up_bdf, acs_redirect=cur.acs))
        internal = _wanted_bus({}, cur, where)
        children = node["switch"] or ()
        if len(children) > 32:
            raise ProfileError(f"{where}: a switch has at most 32 downstream ports")
        for i, child in enumerate(children):
            port = _bdf(cur.domain, internal, i, 0)
            self._bridge_and_child(port, up_bdf, kind="downstream-port", switch=up_bdf, ids=(ids[0], ids[1]),
                                   child=child, cur=cur, where=f"{where}.switch[{i}]")
        gen = int(node.get("gen", cur.gen))
        old = self.functions[up_index]
        self.functions[up_index] = Function(**{**old.__dict__, "secondary": internal,
                                               "subordinate": cur.next_bus - 1, "link": (gen, 16, gen, 16)})
        return gen, 16


class PcieTree:
    """Where each function of a machine sits, indexed once: a pair's level is asked for every GPU pair."""

    def __init__(self, functions: Sequence[Function], host_bridges: Sequence[HostBridge]) -> None:
        self._by_bdf = {f.bdf: f for f in functions}
        self._roots = {h.id for h in host_bridges}

    def place(self, bdf: str) -> tuple[str, tuple[str, ...], int]:
        """(host bridge id, bridge chain from the root port down, numa node) of a function."""
        fn = self._by_bdf[bdf]
        chain: list[str] = []
        parent = fn.parent
        while parent not in self._roots:
            chain.append(parent)
            parent = self._by_bdf[parent].parent
        return parent, tuple(reversed(chain)), fn.numa

    def level(self, a: str, b: str) -> str:
        """How NVML and nvidia-smi class the PCIe path between two functions: PIX, PXB, PHB, NODE or SYS.

        Counts switches by identity (each bridge knows its switch), not by chain parity. Devices on different
        host bridges are NODE only when both NUMA nodes are known and equal.
        """
        root_a, chain_a, numa_a = self.place(a)
        root_b, chain_b, numa_b = self.place(b)
        if root_a != root_b:
            return "NODE" if numa_a == numa_b and numa_a >= 0 else "SYS"
        common = 0
        while common < min(len(chain_a), len(chain_b)) and chain_a[common] == chain_b[common]:
            common += 1
        if common == 0:
            return "PHB"
        walked = {chain_a[common - 1], *chain_a[common:], *chain_b[common:]}
        switches = {self._by_bdf[bdf].switch for bdf in walked}
        return "PIX" if len(switches) <= 1 else "PXB"
