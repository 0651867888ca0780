"""The groups a ResourceClaim may ask for on a node, by PCI bus id: NVLink islands, GPUs under one PCIe switch
(at every level of the PCIe tree: pairs under leaf switches and the quad under the switch above them), and each
GPU with its nearest RDMA NIC; and the claim class, the hash of those groups.

Everything starts from one :class:`GpuPlace` per GPU, the facts topolink's ResourceSlice device of that GPU
carries (bus id, island, NVLink count and generation, switch, nearest NIC and the path to it). A node's places
come from its snapshot (:func:`places_of`, for the node label and the page); a fleet's from the slices its agents
published (``exporter.kube``), and the two agree by construction of the slice attributes (the tests hold them to
it for every machine profile).

Islands are ordered best first by their theoretical NVLink rate (the slowest member's active links times the
rate of their generation), then by size: a structural figure, so the order, and with it the class, does not
move with every measurement; a link that goes down lowers the count, and so the order, or splits the island.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from topology import (
    PathClass,
    Snapshot,
    nearest_nics,
    nvlink_bytes_per_second,
    nvlink_islands,
    path_index,
    pcie_switch,
    pcie_switches,
)

from ._health import nvlink_counts

PAIR_PATHS = ("PIX", "PXB", "PHB")  # a GPU and a NIC under one switch, or one root complex: GPUDirect's paths
CLASS_DIGITS = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuPlace:
    device: str  # the GPU's device name in the slices, gpu-<minor> (as NVIDIA's DRA driver names it)
    bus: str  # PCI bus id, dddd:bb:dd.f
    island: int | None = None  # NVLink island index on the node (largest first), None when not known
    nvlink_bytes_per_second: float | None = None  # theoretical: active links x the rate of their generation
    switch: str | None = None  # upstream port of the nearest PCIe switch; None under a root port
    switches_above: tuple[str, ...] = ()  # upstream ports of the switches above that one, nearest first
    nic: str | None = None  # the nearest RDMA NIC's RDMA device name (mlx5_0)
    nic_bus: str | None = None
    nic_path: str | None = None  # PCIe class to it: PIX, PXB, PHB, NODE, SYS


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    devices: tuple[str, ...]  # GPU device names, in bus order
    buses: tuple[str, ...]
    bytes_per_second: float | None = None  # islands: theoretical NVLink rate of the slowest member


@dataclass(frozen=True, slots=True, kw_only=True)
class Pair:
    gpu: str
    gpu_bus: str
    nic: str
    nic_bus: str
    path: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimGroups:
    islands: tuple[Group, ...]  # best first
    switches: tuple[Group, ...]  # largest first
    pairs: tuple[Pair, ...]  # nearest first
    gpus: int

    @property
    def class_id(self) -> str:
        """The first hex digits of a hash over the groups in order: nodes with equal ids make the same groups
        of the same bus ids, so one ResourceClaimTemplate means the same GPUs on each of them."""
        body = {"islands": [g.buses for g in self.islands], "switches": [g.buses for g in self.switches],
                "pairs": [(p.gpu_bus, p.nic_bus, p.path) for p in self.pairs]}
        raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(raw).hexdigest()[:CLASS_DIGITS]

    def largest(self, kind: str) -> int:
        found = self.islands if kind == "nvlink" else self.switches
        return max((len(g.buses) for g in found), default=0)


def _group(members: Sequence[GpuPlace], rate: float | None = None) -> Group:
    ordered = sorted(members, key=lambda p: p.bus)
    return Group(devices=tuple(p.device for p in ordered), buses=tuple(p.bus for p in ordered), bytes_per_second=rate)


def claim_groups(places: Iterable[GpuPlace]) -> ClaimGroups:
    """The node's groups from its GPUs' places: islands and switches of two GPUs or more, and every GPU whose
    nearest RDMA NIC is under its switch or root complex."""
    gpus = sorted(places, key=lambda p: p.bus)
    islands: dict[int, list[GpuPlace]] = {}
    switches: dict[str, list[GpuPlace]] = {}
    for p in gpus:
        if p.island is not None:
            islands.setdefault(p.island, []).append(p)
        for switch in (p.switch, *p.switches_above) if p.switch is not None else ():
            switches.setdefault(switch, []).append(p)
    made = []
    for members in islands.values():
        rates = [p.nvlink_bytes_per_second for p in members]
        made.append(_group(members, None if None in rates else min(r for r in rates if r is not None)))
    best = sorted((g for g in made if len(g.buses) > 1),
                  key=lambda g: (-(g.bytes_per_second or 0.0), -len(g.buses), g.buses))
    under = sorted({g.buses: g for g in (_group(m) for m in switches.values() if len(m) > 1)}.values(),
                   key=lambda g: (-len(g.buses), g.buses))  # every level's; an upper switch over one lower: once
    pairs = sorted((Pair(gpu=p.device, gpu_bus=p.bus, nic=p.nic, nic_bus=p.nic_bus, path=p.nic_path) for p in gpus
                    if p.nic and p.nic_bus and p.nic_path in PAIR_PATHS),
                   key=lambda q: (PAIR_PATHS.index(q.path), q.gpu_bus))
    return ClaimGroups(islands=tuple(best), switches=tuple(under), pairs=tuple(pairs), gpus=len(gpus))


def places_of(snap: Snapshot) -> tuple[GpuPlace, ...]:
    """One place per GPU the slices publish (a minor number and a bus id), lost GPUs left out, with the facts
    those devices carry."""
    islands = {gid: i for i, isl in enumerate(nvlink_islands(snap)) for gid in isl.gpus}
    counts = nvlink_counts(snap)
    index = path_index(snap)
    nics = {n.id: n for n in snap.nics}
    out = []
    for g in snap.gpus:
        if g.lost or g.minor is None or g.minor < 0:
            continue
        gens = [v for lk in snap.links if g.id in (lk.a, lk.b) and (v := lk.nvlink_version or 0) > 0]
        rate = nvlink_bytes_per_second(min(gens), counts.get(g.id, 0)) if gens else None
        switch = pcie_switch(snap, g.id)
        above = pcie_switches(snap, g.id)[1:]
        near = nearest_nics(snap, g.id, index)
        nic = nics.get(near[0]) if near else None
        path = index.pcie_class(g.id, nic.id) if nic is not None else None
        out.append(GpuPlace(
            device=f"gpu-{g.minor}", bus=g.id, island=islands.get(g.id), nvlink_bytes_per_second=rate or None,
            switch=switch if switch and not switch.startswith("pci") else None, switches_above=above,
            nic=nic.name if nic is not None else None, nic_bus=nic.pci_bus_id if nic is not None else None,
            nic_path=path.value if path is not None and path not in (PathClass.UNKNOWN, PathClass.LOST) else None))
    return tuple(out)
