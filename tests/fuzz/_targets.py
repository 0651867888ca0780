"""What discovery reads in a tree: the paths worth mutating, by category (relative to the root)."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

PCI_ATTRS = ("class", "vendor", "device", "numa_node", "local_cpus", "local_cpulist", "current_link_speed",
             "current_link_width", "max_link_speed", "max_link_width", "config")
NODE_ATTRS = ("cpulist", "cpumap", "meminfo", "distance")
IB_PORT_ATTRS = ("state", "rate", "link_layer")
NET_ATTRS = ("operstate", "type", "speed")
PROC_FILES = ("proc/cpuinfo", "proc/meminfo", "proc/sys/kernel/osrelease", "proc/sys/kernel/hostname",
              "proc/driver/nvidia/version")
INTERESTING_CLASSES = ("0x0300", "0x0302", "0x0200", "0x0207", "0x0604", "0x0680")  # GPU, NIC, IB, bridge


@dataclass(frozen=True)
class Targets:
    """Paths by kind: ``files`` are regular attribute files, ``dirs`` real directories, ``links`` symlinks."""

    files: dict[str, tuple[str, ...]]  # category -> paths
    dirs: dict[str, tuple[str, ...]]
    links: dict[str, tuple[str, ...]]

    def categories(self) -> list[tuple[str, str]]:
        """(type, category) pairs with at least one path, in a fixed order."""
        out = []
        for typ, table in (("file", self.files), ("dir", self.dirs), ("link", self.links)):
            out += [(typ, cat) for cat in sorted(table) if table[cat]]
        return out

    def paths(self, typ: str, category: str) -> tuple[str, ...]:
        return {"file": self.files, "dir": self.dirs, "link": self.links}[typ][category]


def _rel(root: Path, path: str) -> str:
    return os.path.relpath(path, root)


def _files(root: Path, pattern: str) -> list[str]:
    return sorted(_rel(root, p) for p in glob.glob(str(root / pattern))
                  if os.path.isfile(p) and not os.path.islink(p))


def _links(root: Path, pattern: str) -> list[str]:
    return sorted(_rel(root, p) for p in glob.glob(str(root / pattern)) if os.path.islink(p))


def _dirs(root: Path, pattern: str) -> list[str]:
    return sorted(_rel(root, p) for p in glob.glob(str(root / pattern)) if os.path.isdir(p) and not os.path.islink(p))


def _interesting(root: Path, device_dir: str) -> bool:
    try:
        cls = (root / device_dir / "class").read_text().strip()
    except OSError:
        return False
    return cls.startswith(INTERESTING_CLASSES)


def find_targets(root: Path) -> Targets:
    """The attribute files, directories and links discovery reads under ``root``."""
    files: dict[str, list[str]] = {}
    dirs: dict[str, list[str]] = {}
    links: dict[str, list[str]] = {}
    bus_links = _links(root, "sys/bus/pci/devices/*")
    device_dirs = sorted({_rel(root, os.path.realpath(root / link)) for link in bus_links
                          if os.path.isdir(root / link)})
    hot = [d for d in device_dirs if _interesting(root, d)]
    for cat, chosen in (("pci-hot", hot), ("pci", device_dirs)):
        files[cat] = [f"{d}/{a}" for d in chosen for a in PCI_ATTRS if os.path.isfile(root / d / a)]
        links[f"{cat}-driver"] = [f"{d}/driver" for d in chosen if os.path.islink(root / d / "driver")]
    dirs["pci-hot"] = hot
    links["pci-bus"] = bus_links
    files["numa"] = [p for a in NODE_ATTRS for p in _files(root, f"sys/devices/system/node/node*/{a}")]
    dirs["numa"] = ["sys/devices/system/node"] * 2 + _dirs(root, "sys/devices/system/node/node*")
    files["cpu"] = _files(root, "sys/devices/system/cpu/online") + _files(root, "sys/devices/system/cpu/possible")
    files["proc"] = [p for p in PROC_FILES if os.path.isfile(root / p)]
    files["nvidia-proc"] = _files(root, "proc/driver/nvidia/gpus/*/numa_status") + _files(
        root, "proc/driver/nvidia/gpus/*/information")
    dirs["nvidia-proc"] = _dirs(root, "proc/driver/nvidia/gpus/*")
    ib = _links(root, "sys/class/infiniband/*")
    links["ib"] = ib + [p for p in _links(root, "sys/class/infiniband/*/device")]
    files["ib"] = [p for a in IB_PORT_ATTRS for p in _files(root, f"sys/class/infiniband/*/ports/*/{a}")]
    dirs["ib"] = _dirs(root, "sys/class/infiniband/*/ports") + _dirs(root, "sys/class/infiniband/*/ports/*")
    net = _links(root, "sys/class/net/*")
    links["net"] = net + _links(root, "sys/class/net/*/device")
    files["net"] = [p for a in NET_ATTRS for p in _files(root, f"sys/class/net/*/{a}")]
    dirs["module"] = _dirs(root, "sys/module") + _dirs(root, "sys/module/nvidia*") + _dirs(
        root, "sys/kernel/mm/memory_peers")
    dirs["module"] += _dirs(root, "sys/kernel/mm/memory_peers/*")
    return Targets(files={k: tuple(v) for k, v in files.items()}, dirs={k: tuple(v) for k, v in dirs.items()},
                   links={k: tuple(v) for k, v in links.items()})
