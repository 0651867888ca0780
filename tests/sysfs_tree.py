"""Builds small sysfs trees the way the kernel lays them out: class and bus entries are relative symlinks
into ``/sys/devices``, attributes are one-line files."""

from __future__ import annotations

import os
from pathlib import Path

from topology import parse_cpulist


def cpumask(cpulist: str) -> str:
    """``0-3,8`` -> the kernel's comma-grouped hex mask ``00000000,0000010f``."""
    value = sum(1 << c for c in parse_cpulist(cpulist))
    text = f"{value:016x}"
    return ",".join(text[i:i + 8] for i in range(0, len(text), 8))


class SysfsTree:
    def __init__(self, base: Path) -> None:
        self.base = base

    def write(self, rel: str, content: str | bytes) -> Path:
        path = self.base / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content + "\n")
        return path

    def link(self, rel: str, to: str) -> None:
        """A symlink at ``rel`` pointing at ``to`` (both below the root), written relative as sysfs does."""
        path = self.base / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        target = self.base / to.lstrip("/")
        path.symlink_to(os.path.relpath(target, path.parent))

    def pci(self, path: str, *, vendor: str | None = "0x8086", device: str | None = "0x1234",
            cls: str | None = "0x060400", numa: str | None = "-1", cpus: str | None = "0-3", driver: str | None = None,
            speed: str | None = None, width: str | None = None, max_speed: str | None = None,
            max_width: str | None = None, config: bytes | None = None, listed: bool = True) -> str:
        """A function at ``/sys/devices/<path>`` (``pci0000:00/0000:00:01.0/0000:01:00.0``); returns its id.
        A keyword set to None leaves that attribute out."""
        bdf = path.rsplit("/", 1)[-1]
        d = f"sys/devices/{path}"
        attrs = {"vendor": vendor, "device": device, "class": cls, "numa_node": numa,
                 "current_link_speed": speed, "current_link_width": width, "max_link_speed": max_speed,
                 "max_link_width": max_width}
        if cpus is not None:
            attrs |= {"local_cpus": cpumask(cpus), "local_cpulist": cpus}
        for name, value in attrs.items():
            if value is not None:
                self.write(f"{d}/{name}", value)
        self.write(f"{d}/config", config if config is not None else bytes(64))
        if driver is not None:
            (self.base / f"sys/bus/pci/drivers/{driver}").mkdir(parents=True, exist_ok=True)
            self.link(f"{d}/driver", f"sys/bus/pci/drivers/{driver}")
        if listed:
            self.link(f"sys/bus/pci/devices/{bdf}", d)
        return bdf

    def node(self, index: int, cpulist: str, *, mem_kb: int = 1 << 20, distance: str = "10") -> None:
        d = f"sys/devices/system/node/node{index}"
        self.write(f"{d}/cpulist", cpulist)
        self.write(f"{d}/meminfo", f"Node {index} MemTotal:       {mem_kb} kB\nNode {index} MemFree:  1 kB")
        self.write(f"{d}/distance", distance)

    def netdev(self, name: str, pci_path: str | None = None, *, operstate: str = "up", speed: str = "100000",
               arp_type: str = "1") -> None:
        d = f"sys/devices/{pci_path}/net/{name}" if pci_path else f"sys/devices/virtual/net/{name}"
        for attr, value in (("operstate", operstate), ("speed", speed), ("type", arp_type)):
            self.write(f"{d}/{attr}", value)
        self.link(f"sys/class/net/{name}", d)

    def hca(self, name: str, pci_path: str, *, ports: dict[str, tuple[str, str, str]] | None = None) -> None:
        """An RDMA device below a PCI function; ports map number -> (state, rate, link_layer)."""
        d = f"sys/devices/{pci_path}/infiniband/{name}"
        for number, (state, rate, layer) in (ports or {"1": ("4: ACTIVE", "200 Gb/sec (4X HDR)",
                                                             "InfiniBand")}).items():
            self.write(f"{d}/ports/{number}/state", state)
            self.write(f"{d}/ports/{number}/rate", rate)
            self.write(f"{d}/ports/{number}/link_layer", layer)
        self.link(f"{d}/device", f"sys/devices/{pci_path}")
        self.link(f"sys/class/infiniband/{name}", d)
