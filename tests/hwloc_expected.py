"""Reads hwloc's expected outputs (``lstopo -v`` console text and ``lstopo --of xml``) into plain facts.

Only what discovery is compared on: NUMA nodes with their CPUs and memory, the NUMA latency matrix, PCI
functions with ids, class, link rate, parent in the PCI tree and the CPU set of the object hwloc
attached their root complex to, and the network / RDMA OS devices under each function.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
# OS device kinds in XML: hwloc 3 writes flags, hwloc 2 an enumeration.
_OSDEV_V3_NETWORK, _OSDEV_V3_OPENFABRICS = 16, 32
_OSDEV_V2_NETWORK, _OSDEV_V2_OPENFABRICS = 2, 3


@dataclass
class Numa:
    os_index: int
    cpus: frozenset[int]  # for a node without CPUs hwloc gives the CPU set of the object it hangs it on
    memory_bytes: int
    memory_exact: bool  # console output rounds to a unit
    gpu_bus_id: str | None = None  # GPU memory onlined as a NUMA node (PCIBusID)


@dataclass
class Pci:
    bus_id: str
    vendor_id: int
    device_id: int
    class_id: int  # 16 bits: base class and subclass
    parent: str  # upstream bridge's bus id, or pciDDDD:BB for a host bridge
    locality: frozenset[int]  # CPUs of the object the host bridge hangs on
    link_gbytes: float | None  # per direction, GB/s; None when hwloc printed none
    netdevs: set[str] = field(default_factory=set)
    rdma: set[str] = field(default_factory=set)


@dataclass
class Expected:
    pus: frozenset[int]
    numa: dict[int, Numa]
    latency: dict[tuple[int, int], int] | None  # os index pairs
    pci: dict[str, Pci]


@dataclass
class Spec:
    name: str
    source: str
    target: str
    options: str = ""
    env: list[str] = field(default_factory=list)


def read_test(path: Path) -> Spec:
    """hwloc's ``.test`` file: ``source:``, ``target:``, ``options:`` and any number of ``env:`` lines."""
    spec = Spec(name=path.stem, source="", target="")
    for line in path.read_text().splitlines():
        key, sep, value = line.partition(":")
        if line.startswith("#") or not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "env":
            spec.env.append(value)
        elif key in ("source", "target", "options"):
            setattr(spec, key, value)
    return spec


def load(path: Path) -> Expected:
    return _from_xml(path) if path.suffix == ".xml" else _from_console(path.read_text())


def bitmap(text: str) -> frozenset[int]:
    """hwloc's ``0x000000ff,0xffffffff`` (32-bit words, most significant first)."""
    value = 0
    for word in text.split(","):
        value = value << 32 | int(word or "0", 16)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def _host_bridge(domain: str, bus: str) -> str:
    return f"pci{int(domain, 16):04x}:{int(bus, 16):02x}"


def _bdf(text: str) -> str:
    domain, bus, rest = text.split(":")
    return f"{int(domain, 16):04x}:{bus.lower()}:{rest.lower()}"


# ---- XML ------------------------------------------------------------------------------------------------

def _from_xml(path: Path) -> Expected:
    top = ET.parse(path).getroot()
    v3 = not top.get("version", "2").startswith("2")
    machine = top.find("object")
    assert machine is not None
    numa: dict[int, Numa] = {}
    pci: dict[str, Pci] = {}
    pus: set[int] = set()

    def walk(obj: ET.Element, cpus: frozenset[int], parent_io: str | None) -> None:
        kind = obj.get("type")
        if obj.get("cpuset"):
            cpus = bitmap(obj.get("cpuset", "0"))
        here = parent_io
        if kind == "PU":
            pus.add(int(obj.get("os_index", "-1")))
        elif kind == "NUMANode":
            info = {i.get("name"): i.get("value") for i in obj.findall("info")}
            idx = int(obj.get("os_index", "-1"))
            numa[idx] = Numa(idx, cpus, int(obj.get("local_memory", "0")), True, info.get("PCIBusID"))
        elif kind == "Bridge" and obj.get("pci_busid") is None:  # a host bridge
            m = re.match(r"([0-9a-f]+):\[([0-9a-f]+)-", obj.get("bridge_pci", ""))
            assert m is not None
            here = _host_bridge(m.group(1), m.group(2))
            for child in obj.findall("object"):
                walk(child, cpus, here)
            _localise(pci, here, cpus)
            return
        elif kind in ("PCIDev", "Bridge"):
            bdf = _bdf(obj.get("pci_busid", ""))
            m = re.match(r"([0-9a-f]{4}) \[([0-9a-f]{4}):([0-9a-f]{4})\]", obj.get("pci_type", ""))
            assert m is not None and parent_io is not None
            speed = float(obj.get("pci_link_speed", "0"))
            pci[bdf] = Pci(bdf, int(m.group(2), 16), int(m.group(3), 16), int(m.group(1), 16), parent_io,
                           frozenset(), speed or None)
            here = bdf
        elif kind == "OSDev" and parent_io in pci:
            kind_id = int(obj.get("osdev_type", "-1"))
            if _osdev_is(kind_id, v3, _OSDEV_V3_OPENFABRICS, _OSDEV_V2_OPENFABRICS):
                pci[parent_io].rdma.add(obj.get("name", ""))
            elif _osdev_is(kind_id, v3, _OSDEV_V3_NETWORK, _OSDEV_V2_NETWORK):
                pci[parent_io].netdevs.add(obj.get("name", ""))
        for child in obj.findall("object"):
            walk(child, cpus, here)

    walk(machine, frozenset(), None)
    latency = None
    for d in top.findall("distances2"):
        if d.get("type") == "NUMANode" and d.get("name") == "NUMALatency" and d.get("indexing") == "os":
            ids = [int(v) for v in (d.findtext("indexes") or "").split()]
            values = [int(v) for u in d.findall("u64values") for v in (u.text or "").split()]
            latency = {(a, b): values[i * len(ids) + j] for i, a in enumerate(ids) for j, b in enumerate(ids)}
    return Expected(frozenset(pus), numa, latency, pci)


def _osdev_is(kind_id: int, v3: bool, flag: int, value: int) -> bool:
    return bool(kind_id & flag) if v3 else kind_id == value


def _localise(pci: dict[str, Pci], host_bridge: str, cpus: frozenset[int]) -> None:
    below = {host_bridge}
    for p in pci.values():  # parents come before children in document order
        if p.parent in below:
            p.locality = cpus
            below.add(p.bus_id)


# ---- console (lstopo -v) ----------------------------------------------------------------------------------

@dataclass
class _Node:
    kind: str
    line: str
    children: list[_Node] = field(default_factory=list)
    parent: _Node | None = None

    def pus(self) -> frozenset[int]:
        mine = {_p_index(self.line)} if self.kind == "PU" else set()
        return frozenset(mine.union(*(c.pus() for c in self.children)))


def _p_index(line: str) -> int:
    m = re.search(r"(?:L#\d+|^\w+) \(P#(\d+)", line)
    assert m is not None, line
    return int(m.group(1))


def _tree(text: str) -> _Node:
    stack: list[tuple[int, _Node]] = []
    root: _Node | None = None
    for raw in text.splitlines():
        if raw.startswith(("depth", "Special depth", "Relative", "Topology", "Memory tier", " index")):
            break
        stripped = raw.lstrip(" ")
        kind_m = re.match(r"[A-Za-z0-9]+", stripped)
        if not kind_m:
            continue
        node = _Node(kind_m.group(0), stripped)
        level = len(raw) - len(stripped)
        while stack and stack[-1][0] >= level:
            stack.pop()
        if stack:
            node.parent = stack[-1][1]
            node.parent.children.append(node)
        else:
            root = node
        stack.append((level, node))
    assert root is not None
    return root


def _from_console(text: str) -> Expected:
    root = _tree(text)
    numa: dict[int, Numa] = {}
    logical: dict[int, int] = {}
    pci: dict[str, Pci] = {}

    def walk(node: _Node, parent_io: str | None, locality: frozenset[int]) -> None:
        here = parent_io
        line = node.line
        if node.kind == "NUMANode":
            assert node.parent is not None
            idx = _p_index(line)
            logical[int(re.search(r"L#(\d+)", line).group(1))] = idx  # type: ignore[union-attr]
            mem = re.search(r"local=(\d+)(KiB|MiB|GiB|TiB)", line)
            bus = re.search(r"PCIBusID=([0-9a-fA-F:.]+)", line)
            numa[idx] = Numa(idx, node.parent.pus(), int(mem.group(1)) * _UNITS[mem.group(2)] if mem else 0,
                             False, _bdf(bus.group(1)) if bus else None)
        elif node.kind == "HostBridge":
            m = re.search(r"buses=([0-9a-f]+):\[([0-9a-f]+)-", line)
            assert m is not None and node.parent is not None
            here, locality = _host_bridge(m.group(1), m.group(2)), node.parent.pus()
        elif node.kind in ("PCI", "PCIBridge"):
            m = re.search(r"busid=(\S+) id=([0-9a-f]{4}):([0-9a-f]{4}) class=([0-9a-f]{4})", line)
            assert m is not None and parent_io is not None, line
            link = re.search(r"link=([\d.]+)GB/s", line)
            bdf = _bdf(m.group(1))
            pci[bdf] = Pci(bdf, int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16), parent_io,
                           locality, float(link.group(1)) if link else None)
            here = bdf
        elif node.kind == "OSDev" and parent_io in pci:
            name = re.search(r'"([^"]+)"$', line)
            if name and line.startswith("OSDev[OpenFabrics]"):
                pci[parent_io].rdma.add(name.group(1))
            elif name and line.startswith("OSDev[Network]"):
                pci[parent_io].netdevs.add(name.group(1))
        for child in node.children:
            walk(child, here, locality)

    walk(root, None, frozenset())
    return Expected(root.pus(), numa, _console_latency(text, logical), pci)


def _console_latency(text: str, logical: dict[int, int]) -> dict[tuple[int, int], int] | None:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"Relative latency matrix \(name NUMALatency .*\) between (\d+) NUMANodes .* by (\w+) indexes",
                     line)
        if m is None:
            continue
        n, by_os = int(m.group(1)), m.group(2) == "os"
        header = [int(v) for v in lines[i + 1].split()[1:]]
        out = {}
        for row in lines[i + 2: i + 2 + n]:
            first, *values = (int(v) for v in row.split())
            for col, v in zip(header, values, strict=True):
                a, b = (first, col) if by_os else (logical[first], logical[col])
                out[(a, b)] = v
        return out
    return None
