"""The sysfs (and a little procfs) view of a :class:`Machine`, written as a real kernel lays it out.

    sys/devices/pciDDDD:BB/<root port>/<...>/<function>/{vendor,device,class,numa_node,local_cpulist,...}
    sys/bus/pci/devices/<bdf> -> ../../../devices/pciDDDD:BB/.../<bdf>
    sys/bus/pci/drivers/<driver>/<bdf> -> ../../../../devices/...
    sys/class/infiniband/mlx5_N -> ../../devices/.../<bdf>/infiniband/mlx5_N   (ports/1/{rate,state,...})
    sys/class/net/<if> -> ../../devices/.../<bdf>/net/<if>                     (and virtual/net/lo)
    sys/devices/system/node/nodeN/{cpulist,cpumap,distance,meminfo}
    sys/devices/system/cpu/{online,possible,present}
    proc/driver/nvidia/{version,gpus/<bdf>/information}
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from topology import format_cpulist

from ._catalog import LINK_SPEED
from ._profile import Machine
from ._tree import Function

_DRIVERS = {"gpu": "nvidia", "nvswitch": "nvidia-nvswitch", "nic": "mlx5_core", "device": "nvme"}
_BRIDGE_DRIVER = "pcieport"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _link(path: Path, target: Path) -> None:
    """A relative symlink, as sysfs has them, so the tree can move."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(target, path.parent), path)


def cpumask(cpus: tuple[int, ...], nr_cpus: int) -> str:
    """The kernel's hex cpumask: 32-bit groups, most significant first, comma separated."""
    value = sum(1 << c for c in cpus)
    groups = max(1, (nr_cpus + 31) // 32)
    words = [(value >> (32 * i)) & 0xFFFFFFFF for i in reversed(range(groups))]
    return ",".join(f"{w:08x}" for w in words)


def _device_dirs(machine: Machine, sys: Path) -> dict[str, Path]:
    by_bdf = {f.bdf: f for f in machine.functions}
    dirs: dict[str, Path] = {}
    for f in machine.functions:
        parts = [f.bdf]
        parent = f.parent
        while parent in by_bdf:
            parts.append(parent)
            parent = by_bdf[parent].parent
        dirs[f.bdf] = sys.joinpath("devices", parent, *reversed(parts))
    return dirs


def config_space(f: Function) -> bytes:
    """PCI configuration space as root reads it (4096 bytes) when the profile says whether ACS redirect is
    on, else the 64-byte header an unprivileged reader gets. The ACS capability sits at 0x100."""
    header = bytearray(64)
    struct.pack_into("<HH", header, 0, f.vendor, f.device)
    struct.pack_into("<I", header, 8, f.class_code << 8)
    header[0x0E] = 1 if f.secondary is not None else 0
    if f.acs_redirect is None:
        return bytes(header)
    space = bytearray(4096)
    space[:64] = header
    control = 0x1D if f.acs_redirect else 0x00  # source validation, request redirect, completion redirect, upstream
    struct.pack_into("<IHH", space, 0x100, 0x000D | 1 << 16, 0x1F, control)
    return bytes(space)


def _function(machine: Machine, f: Function, d: Path, sys: Path) -> None:
    nr = (max(machine.cpus) + 1) if machine.cpus else 1
    cpus = machine.numa_cpus(f.numa) if f.numa >= 0 else machine.cpus
    sub_vendor, sub_device = (0x10DE, int(f.spec.get("subsystem", 0))) if f.kind == "gpu" else (f.vendor, 0)
    attrs = {"vendor": f"0x{f.vendor:04x}", "device": f"0x{f.device:04x}", "class": f"0x{f.class_code:06x}",
             "subsystem_vendor": f"0x{sub_vendor:04x}", "subsystem_device": f"0x{sub_device:04x}",
             "revision": "0xa1" if f.vendor == 0x10DE else "0x00", "numa_node": str(f.numa),
             "local_cpulist": format_cpulist(cpus), "local_cpus": cpumask(cpus, nr), "enable": "1",
             "irq": "0"}
    if f.link is not None:
        cur_gen, cur_width, max_gen, max_width = f.link
        attrs |= {"current_link_speed": LINK_SPEED[cur_gen], "current_link_width": str(cur_width),
                  "max_link_speed": LINK_SPEED[max_gen], "max_link_width": str(max_width)}
    if f.secondary is not None:
        attrs |= {"secondary_bus_number": str(f.secondary), "subordinate_bus_number": str(f.subordinate)}
    driver = _BRIDGE_DRIVER if f.kind.endswith("port") else f.spec.get("driver", _DRIVERS.get(f.kind))
    uevent = [f"PCI_CLASS={f.class_code:X}", f"PCI_ID={f.vendor:04X}:{f.device:04X}",
              f"PCI_SUBSYS_ID={sub_vendor:04X}:{sub_device:04X}", f"PCI_SLOT_NAME={f.bdf}"]
    if driver:
        uevent.insert(0, f"DRIVER={driver}")
    attrs["uevent"] = "\n".join(uevent)
    for name, value in attrs.items():
        _write(d / name, value)
    (d / "config").write_bytes(config_space(f))
    _link(d / "subsystem", sys / "bus" / "pci")
    if driver:
        drv = sys / "bus" / "pci" / "drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        _link(d / "driver", drv)
        _link(drv / f.bdf, d)
    _link(sys / "bus" / "pci" / "devices" / f.bdf, d)


def _nic(machine: Machine, f: Function, d: Path, sys: Path, index: int) -> None:
    s = f.spec
    name = str(s.get("name", f"mlx5_{index}"))
    rdma = bool(s.get("rdma", True))
    ib_layer = str(s["link_layer"]) == "InfiniBand"
    netdev = str(s.get("netdev", f"ib{index}" if ib_layer else f"eth{index}"))
    if rdma:
        ib = d / "infiniband" / name
        _link(sys / "class" / "infiniband" / name, ib)
        _link(ib / "device", d)
        state = str(s["state"])
        port_state = {"ACTIVE": "4: ACTIVE", "DOWN": "1: DOWN", "INIT": "2: INIT"}.get(state, state)
        phys = "5: LinkUp" if state == "ACTIVE" else "3: Disabled"
        for port in range(1, int(s.get("ports", 1)) + 1):
            p = ib / "ports" / str(port)
            _write(p / "rate", str(s["rate"]))
            _write(p / "state", port_state)
            _write(p / "phys_state", phys)
            _write(p / "link_layer", str(s["link_layer"]))
        _write(ib / "node_type", "1: CA")
        _write(ib / "fw_ver", str(s.get("fw_ver", "28.39.1002")))
        _write(ib / "hca_type", str(s.get("hca_type", "MT4129")))
        _write(ib / "node_guid", f"b83f:d203:00{index:02x}:{int(f.bdf[5:7], 16):04x}")
    net = d / "net" / netdev
    _link(sys / "class" / "net" / netdev, net)
    _link(net / "device", d)
    mac = f"58:a2:e1:{index:02x}:{int(f.bdf[5:7], 16):02x}:{int(f.bdf[-1]):02x}"
    _write(net / "address", f"00:00:10:29:fe:80:00:00:00:00:00:00:b8:3f:{mac}" if ib_layer else mac)
    _write(net / "operstate", "up" if s["state"] == "ACTIVE" else "down")
    _write(net / "mtu", "4092" if ib_layer else "1500")
    _write(net / "type", "32" if ib_layer else "1")
    rate = str(s["rate"]).split()[0]
    if s["state"] == "ACTIVE" and rate.replace(".", "").isdigit():
        _write(net / "speed", str(int(float(rate) * 1000)))


def _numa(machine: Machine, sys: Path) -> None:
    base = sys / "devices" / "system" / "node"
    nr = (max(machine.cpus) + 1) if machine.cpus else 1
    ids = [n.node for n in machine.numa]
    for row, n in zip(machine.distance, machine.numa, strict=True):
        d = base / f"node{n.node}"
        _write(d / "cpulist", format_cpulist(n.cpus))
        _write(d / "cpumap", cpumask(n.cpus, nr))
        _write(d / "distance", " ".join(str(v) for v in row))
        kib = n.memory_bytes // 1024
        _write(d / "meminfo", f"Node {n.node} MemTotal:       {kib} kB\nNode {n.node} MemFree:        {kib // 2} kB\n"
                              f"Node {n.node} MemUsed:        {kib - kib // 2} kB")
    listed = format_cpulist(ids)
    _write(base / "possible", listed)
    _write(base / "online", listed)
    _write(base / "has_cpu", format_cpulist([n.node for n in machine.numa if n.cpus]))
    _write(base / "has_memory", format_cpulist([n.node for n in machine.numa if n.memory_bytes]))
    _write(base / "has_normal_memory", format_cpulist([n.node for n in machine.numa if n.memory_bytes]))
    cpu = sys / "devices" / "system" / "cpu"
    for name in ("online", "possible", "present"):
        _write(cpu / name, format_cpulist(machine.cpus))


def _proc(machine: Machine, root: Path) -> None:
    proc = root / "proc"
    _write(proc / "sys" / "kernel" / "hostname", machine.name)
    _write(proc / "sys" / "kernel" / "osrelease", str(machine.raw.get("kernel", "6.8.0-60-generic")))
    driver = machine.nvml["driver"]
    if not driver:
        return
    nv = proc / "driver" / "nvidia"
    arch = "aarch64" if machine.platform == "grace" else "x86_64"
    opened = bool(machine.raw.get("open_kernel_modules", True))
    module = f"Open Kernel Module for {arch}" if opened else f"{arch} Kernel Module"
    _write(nv / "version", f"NVRM version: NVIDIA UNIX {module}  {driver}  Release Build\n"
                           "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)")
    for gpu in machine.driver_gpus:
        excluded = "Yes" if gpu.spec.get("excluded") else "No"
        _write(nv / "gpus" / gpu.bdf / "information",
               f"Model: \t\t {gpu.spec['name']}\nIRQ:   \t\t 0\nGPU UUID: \t {machine.gpu_uuid(gpu)}\n"
               f"Video BIOS: \t ??.??.??.??.??\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
               f"DMA Mask: \t 0xfffffffffffff\nBus Location: \t {gpu.bdf}\nDevice Minor: \t "
               f"{machine.minor(gpu)}\nGPU Excluded:\t {excluded}")
        if gpu.spec.get("gpu_numa_id") is not None:
            _write(nv / "gpus" / gpu.bdf / "numa_status", f"Node: {int(gpu.spec['gpu_numa_id'])}\nStatus: online")


def _gdr(machine: Machine, sys: Path) -> None:
    gdr = machine.raw.get("gdr") or {}
    if gdr.get("nvidia_peermem"):
        _write(sys / "module" / "nvidia_peermem" / "initstate", "live")
        _write(sys / "module" / "nvidia_peermem" / "version", machine.nvml["driver"] or "0")
    if gdr.get("memory_peers"):
        _write(sys / "kernel" / "mm" / "memory_peers" / "nv_mem" / "version", "1.3-0")
    if machine.nvml["driver"]:
        _write(sys / "module" / "nvidia" / "version", machine.nvml["driver"])


def write_sysfs(machine: Machine, root: Path) -> Path:
    """Writes the tree under ``root`` (``root/sys``, ``root/proc``) and returns ``root``."""
    sys = root / "sys"
    for hb in machine.host_bridges:
        bus = sys / "devices" / hb.id / "pci_bus" / f"{hb.domain:04x}:{hb.bus:02x}"
        _write(bus / "cpulistaffinity", format_cpulist(machine.numa_cpus(hb.numa)))
        _link(sys / "class" / "pci_bus" / bus.name, bus)
    dirs = _device_dirs(machine, sys)
    for f in machine.functions:
        _function(machine, f, dirs[f.bdf], sys)
    for index, nic in enumerate(machine.nics):
        _nic(machine, nic, dirs[nic.bdf], sys, index)
    lo = sys / "devices" / "virtual" / "net" / "lo"
    _write(lo / "operstate", "unknown")
    _write(lo / "type", "772")
    _link(sys / "class" / "net" / "lo", lo)
    _numa(machine, sys)
    _proc(machine, root)
    _gdr(machine, sys)
    return root
