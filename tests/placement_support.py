"""Machines for the placement tests and benchmark: machine profiles discovered through the test NVML (some
with overrides: a PCIe box with two levels of switches, an 8x B200 board), small hand-built snapshots
for property tests, and a GB200 NVL72-like NVLink domain of 72 GPUs built straight from topology entities.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import topology as t
from tests.fakenvml import ENV_CALLS, ENV_PROFILE, materialize
from tests.reference_data import DATA

PUBLISHED = DATA / "published" / "nccl-all-reduce-busbw.csv"

# An 8x RTX 4090-class PCIe box where each socket has one host bridge, a top switch and two leaf switches of
# two GPUs each: two levels of PCIe switches (as in 8- and 10-GPU PCIe servers with PLX/Broadcom switches).
TWO_LEVEL_SWITCHES: dict[str, Any] = {
    "name": "pcie-2level-8x",
    "pci": [
        {"host_bridge": "0000:16", "numa": 0, "children": [
            {"switch": [{"switch": [{"gpu": {}}, {"gpu": {}}]}, {"switch": [{"gpu": {}}, {"gpu": {}}]}]}]},
        {"host_bridge": "0000:98", "numa": 1, "children": [
            {"switch": [{"switch": [{"gpu": {}}, {"gpu": {}}]}, {"switch": [{"gpu": {}}, {"gpu": {}}]},
                        {"nic": [{"name": "mlx5_0", "netdev": "ens108f0np0"}]}]}]},
    ],
}

# The same layout with four GPUs per leaf switch: 16 GPUs, more than the search enumerates exhaustively.
TWO_LEVEL_SWITCHES_16: dict[str, Any] = {
    "name": "pcie-2level-16x",
    "pci": [
        {"host_bridge": f"0000:{hb}", "numa": numa, "children": [
            {"switch": [{"switch": [{"gpu": {}} for _ in range(4)]}, {"switch": [{"gpu": {}} for _ in range(4)]}]}]}
        for hb, numa in (("16", 0), ("98", 1))
    ],
}

# HGX B200: the HGX H100 board with NVLink 5 (18 links of 50 GB/s per direction to the NVSwitches).
B200: dict[str, Any] = {
    "name": "hgx-b200",
    "nvlink": {"version": "5.0", "links": 18,
               "switch_of_link": [2, 2, 1, 1, 2, 2, 1, 1, 0, 0, 2, 1, 3, 3, 0, 0, 3, 3]},
}


def discover_profile(profile: str, workdir: Path, overrides: Mapping[str, Any] | None = None) -> t.Snapshot:
    """The profile's snapshot as discovery reads it from its sysfs tree and test NVML."""
    from agent.discovery import discover
    from agent.discovery.access import DiscoveryContext, FsRoot

    node = materialize(profile, workdir, overrides)
    saved = {k: os.environ.get(k) for k in (ENV_PROFILE, ENV_CALLS)}
    os.environ[ENV_PROFILE], os.environ[ENV_CALLS] = str(node.nvml_profile), str(node.calls_file)
    try:
        return discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def by_index(snap: t.Snapshot) -> dict[int, str]:
    return {g.index: g.id for g in snap.gpus if g.index is not None}


# -- hand-built PCIe boxes ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Switch:
    """A PCIe switch: its children (GPUs as ``"gpu"``, or switches) and its uplink's gen and width."""

    children: tuple[Any, ...]
    gen: int = 4
    width: int = 16


@dataclass
class _Builder:
    gen: int
    next_bus: int = 1
    pci: list[t.PciFunction] = field(default_factory=list)
    gpus: list[t.Gpu] = field(default_factory=list)

    def bdf(self) -> str:
        bus, self.next_bus = self.next_bus, self.next_bus + 1
        return f"0000:{bus:02x}:00.0"

    def port(self, parent: str, numa: int, gen: int, width: int) -> str:
        bdf = self.bdf()
        self.pci.append(t.PciFunction(id=bdf, parent=parent, vendor_id=0x10B5, device_id=0x9797,
                                      class_code=0x060400, numa_node=numa,
                                      link=t.PcieLinkState(current_gen=gen, current_width=width, max_gen=gen,
                                                           max_width=width)))
        return bdf

    def node(self, item: Any, port: str, numa: int) -> None:
        if item == "gpu":
            bdf = self.bdf()
            link = t.PcieLinkState(current_gen=self.gen, current_width=16, max_gen=self.gen, max_width=16)
            self.pci.append(t.PciFunction(id=bdf, parent=port, vendor_id=0x10DE, device_id=0x2684,
                                          class_code=0x030200, numa_node=numa, link=link))
            self.gpus.append(t.Gpu(id=bdf, index=len(self.gpus), name="NVIDIA Test GPU", numa_node=numa, pcie=link))
            return
        assert isinstance(item, Switch)
        up = self.port(port, numa, item.gen, item.width)
        for child in item.children:
            self.node(child, self.port(up, numa, item.gen, 16), numa)


def pcie_box(sockets: Sequence[Sequence[Any]], *, nvlinks: Sequence[tuple[int, int, int]] = (), gen: int = 4,
             smp_bytes_per_second: float | None = None) -> t.Snapshot:
    """A node from a list per socket of root-port children (``"gpu"`` or :class:`Switch`), each root port on a
    host bridge of its own; ``nvlinks`` are (gpu index, gpu index, bonded NVLink 3 links)."""
    b = _Builder(gen=gen)
    bridges, numa_nodes = [], []
    for numa, items in enumerate(sockets):
        numa_nodes.append(t.NumaNode(id=f"numa{numa}", os_index=numa, cpus=(numa,)))
        for item in items:
            hb = f"pci0000:{b.next_bus:02x}"
            b.next_bus += 1
            bridges.append(t.HostBridge(id=hb, domain=0, bus=int(hb[-2:], 16), numa_node=numa))
            b.node(item, b.port(hb, numa, gen, 16), numa)
    ids = [g.id for g in b.gpus]
    links = [t.Link(a=ids[i], b=ids[j], kind=t.LinkKind.NVLINK, count=n, nvlink_version=3,
                    bytes_per_second=t.nvlink_bytes_per_second(3, n)) for i, j, n in nvlinks]
    if len(sockets) > 1:
        links += [t.Link(a=f"numa{i}", b=f"numa{j}", kind=t.LinkKind.NUMA, numa_distance=21,
                         bytes_per_second=smp_bytes_per_second)
                  for i in range(len(sockets)) for j in range(i + 1, len(sockets))]
    names = tuple(n.id for n in numa_nodes)
    dist = t.Matrix(name="numa_distance", kind=t.MatrixKind.FROM_OS, unit="slit", ids=names,
                    values=tuple(tuple(10.0 if i == j else 21.0 for j in range(len(names))) for i in range(len(names))))
    return t.Snapshot(node="box", host_bridges=tuple(bridges), pci=tuple(b.pci), numa_nodes=tuple(numa_nodes),
                      gpus=tuple(b.gpus), links=tuple(links), matrices=(dist,))


# -- a GB200 NVL72-like NVLink domain --------------------------------------------------------------------

def nvl72(trays: int = 18, switches: int = 18) -> t.Snapshot:
    """``trays`` GB200 compute trays (two Grace sockets of two GPUs each, every GPU on a host bridge of its
    own) whose GPUs reach the same ``switches`` NVSwitch chips over one NVLink 5 link each (18 x 50 GB/s per
    direction), as one NVLink domain: the model of an NVL72 rack that the placement benchmark searches."""
    gpus, pci, bridges, numa_nodes, links = [], [], [], [], []
    switch_ids = [f"nvswitch{k}" for k in range(switches)]
    fabric = t.FabricInfo(state=t.FabricState.COMPLETED, cluster_uuid="3f6c2a1e-8d4b-4c2f-9a57-0e1b2c3d4e5f",
                          clique_id=1)
    link5 = t.PcieLinkState(current_gen=5, current_width=16, max_gen=5, max_width=16)
    for tray in range(trays):
        for socket in range(2):
            numa = 2 * tray + socket
            numa_nodes.append(t.NumaNode(id=f"numa{numa}", os_index=numa, cpus=tuple(range(72 * numa, 72 * numa + 72))))
            for j in range(2):
                domain = 32 * tray + 16 * socket + 8 + j
                hb, port, bdf = f"pci{domain:04x}:00", f"{domain:04x}:00:00.0", f"{domain:04x}:01:00.0"
                bridges.append(t.HostBridge(id=hb, domain=domain, bus=0, numa_node=numa))
                pci.append(t.PciFunction(id=port, parent=hb, vendor_id=0x10DE, device_id=0x22B1, class_code=0x060400,
                                         numa_node=numa, link=link5))
                pci.append(t.PciFunction(id=bdf, parent=port, vendor_id=0x10DE, device_id=0x2941, class_code=0x030200,
                                         numa_node=numa, link=link5))
                gpus.append(t.Gpu(id=bdf, index=len(gpus), name="NVIDIA GB200", numa_node=numa, pcie=link5,
                                  fabric=fabric, architecture="blackwell"))
                links += [t.Link(a=bdf, b=s, kind=t.LinkKind.NVLINK, count=1, nvlink_version=5,
                                 bytes_per_second=50e9) for s in switch_ids]
    ids = tuple(n.id for n in numa_nodes)
    dist = t.Matrix(name="numa_distance", kind=t.MatrixKind.FROM_OS, unit="slit", ids=ids,
                    values=tuple(tuple(10.0 if a == b else 40.0 if a // 2 == b // 2 else 255.0
                                       for b in range(len(ids))) for a in range(len(ids))))
    nvswitches = tuple(t.NvSwitch(id=s, visible_on_pci=False) for s in switch_ids)
    return t.Snapshot(node=f"nvl{4 * trays}", host_bridges=tuple(bridges), pci=tuple(pci),
                      numa_nodes=tuple(numa_nodes), gpus=tuple(gpus), nvswitches=nvswitches, links=tuple(links),
                      matrices=(dist,))


@dataclass(frozen=True)
class Published:
    system: str
    profile: str
    gpus: int
    algorithm: str
    low: float  # bytes/s
    high: float
    source: str


def published() -> list[Published]:
    """The published nccl-tests all-reduce bus bandwidths in tests/data/published, one row per system."""
    import csv

    with PUBLISHED.open(newline="") as f:
        rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
    return [Published(system=r["system"], profile=r["profile"], gpus=int(r["gpus"]), algorithm=r["algorithm"],
                      low=float(r["busbw_gb_s_low"]) * 1e9, high=float(r["busbw_gb_s_high"]) * 1e9, source=r["source"])
            for r in rows]
