"""The pieces of the fabric model: links with a capacity per direction, routes over them, the ports above a
function, the constants that stand in where the snapshot has no number (each named, with its source), and
the measurements read.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass

from ..model._entities import LinkKind, PcieLinkState, PciFunction, Snapshot, link_id
from ..model._measurement import P2P_COPY_TESTS
from ..model._provenance import Source
from ._rates import pcie_bytes_per_second

UNKNOWN = "unknown"

# Achievable share of the line rate, per link kind. NVLink: NCCL's topology model takes 20 GB/s of a
# 25 GB/s NVLink 3 link (SM80_NVLINK_BW), 20.6 of 25 on NVLink 4 (SM90) and 40.1 of 50 on NVLink 5
# (SM100), NVIDIA/nccl src/graph/topo.h; the nccl-tests maintainer puts H100's effective NVLink at about
# 370 of 450 GB/s (NVIDIA/nccl-tests#212). PCIe: copy engines reach 0.80-0.87 of the Gen x16 rate
# (nvbandwidth results: NVIDIA/nvbandwidth#15, #24, #42).
LINK_EFFICIENCY = {LinkKind.NVLINK: 0.8, LinkKind.PCIE: 0.8}
# The SMP link between two sockets, for GPU peer traffic, when the snapshot gives no rate: NCCL's topology
# model uses 10 (Skylake UPI), 16 (AMD Zen 1/2), 22 (Sapphire Rapids), 24 (Zen 3/4) GB/s
# (NVIDIA/nccl src/graph/topo.h, SKL_QPI_BW ... AMD_ZEN34_BW). A default, labelled estimate.
SMP_BYTES_PER_SECOND = 16e9
# Latency of one ring step when none was measured between the two GPUs: NCCL's tuning model, Ring with
# the Simple protocol, 3.4 us over NVLink, 5.7 us over PCIe (NVIDIA/nccl src/graph/tuning.cc, hwLat).
HOP_LATENCY_SECONDS = {LinkKind.NVLINK: 3.4e-6, LinkKind.PCIE: 5.7e-6}
_SOCKET_DISTANCE = 20

Path = tuple[tuple[int, int], ...]  # (link index, direction) in order


@dataclass(frozen=True, slots=True, kw_only=True)
class PhysLink:
    """One physical link; direction 0 is a->b (for PCIe: upstream), 1 is b->a."""

    a: str
    b: str
    kind: LinkKind
    theoretical: float | None  # line rate per direction, bytes/s; None when not known
    capacity: float | None  # what the model lets through per direction, before measurements raise it
    source: str  # of ``capacity``: theoretical (times the efficiency), estimate (a default), unknown

    @property
    def id(self) -> str:
        return link_id(self.kind, self.a, self.b)


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """How a transfer from one GPU to another loads the links: (directed link key, share of the bytes)."""

    medium: LinkKind  # NVLINK or PCIE
    loads: tuple[tuple[int, float], ...]  # key = 2 * link index + direction
    measured: float | None  # the pair's measured rate this way (or the other way, when only that was)
    measured_source: str | None
    latency: float
    latency_source: str


def pcie_rate(*states: PcieLinkState | None) -> float | None:
    """A PCIe link's line rate per direction, the slower end's: at the maximum generation (GPUs lower the
    generation at idle and raise it under load) but the current width (a link trained to fewer lanes stays
    so, and carries that much less)."""
    rates = [pcie_bytes_per_second(s.max_gen or s.current_gen, s.current_width or s.max_width)
             for s in states if s is not None]
    known = [r for r in rates if r]
    return min(known) if known else None


def sockets_of(snap: Snapshot) -> dict[int, int]:
    """CPU NUMA node -> the lowest NUMA node of its socket (nodes closer than SLIT 20 share one)."""
    nodes = sorted(n.os_index for n in snap.numa_nodes if n.cpus and not n.gpu_memory)
    dist = snap.matrix("numa_distance")
    rep = {n: n for n in nodes}
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            d = dist.get(f"numa{a}", f"numa{b}") if dist else None
            if d is not None and d < _SOCKET_DISTANCE and rep[a] != rep[b]:
                old, new = max(rep[a], rep[b]), min(rep[a], rep[b])
                rep = {k: (new if v == old else v) for k, v in rep.items()}
    return rep



def measured_rates(snap: Snapshot) -> dict[tuple[str, str], tuple[float, str]]:
    """(src, dst) -> the fastest measured GPU-to-GPU copy that way, and its source."""
    out: dict[tuple[str, str], tuple[float, str]] = {}
    for m in snap.measurements:
        if (m.test not in P2P_COPY_TESTS or m.unit != "bytes_per_second" or len(m.subjects) != 2
                or m.source is Source.THEORETICAL or not m.value > 0):
            continue
        a, b = m.subjects
        flow = (b, a) if m.direction == "b->a" else (a, b)
        if flow not in out or m.value > out[flow][0]:
            out[flow] = (m.value, m.source.value)
    return out

def measured_latencies(snap: Snapshot) -> dict[frozenset[str], tuple[float, str]]:
    """GPU pair -> the slowest latency measured between the two (any measurement in seconds whose subjects
    are two GPUs, such as ``device_to_device_latency_sm``), and its source."""
    gpus = {g.id for g in snap.gpus}
    out: dict[frozenset[str], tuple[float, str]] = {}
    for m in snap.measurements:
        if (m.unit == "seconds" and len(set(m.subjects)) == 2 and set(m.subjects) <= gpus and m.value > 0
                and m.source is not Source.THEORETICAL):
            key = frozenset(m.subjects)
            if key not in out or m.value > out[key][0]:
                out[key] = (m.value, m.source.value)
    return out


def striped(paths: list[tuple[Path, float | None]]) -> tuple[tuple[int, float], ...]:
    """Each parallel NVLink path carries a share of the bytes in proportion to its rate (equal shares
    when a rate is unknown)."""
    weights = [w for _, w in paths]
    if None in weights or not sum(w for w in weights if w is not None):
        shares = [1.0 / len(paths)] * len(paths)
    else:
        total = sum(w for w in weights if w is not None)
        shares = [(w or 0.0) / total for w in weights]
    return tuple((2 * i + d, share) for (path, _), share in zip(paths, shares, strict=True) for i, d in path)


def ports_above(pci: Mapping[str, PciFunction], roots: Container[str], bdf: str) -> tuple[list[str], str | None]:
    """The ports above the function ``bdf``, nearest first, and the host bridge they end at (None when the
    chain is broken: a parent that is not in ``pci``, or a loop)."""
    ups: list[str] = []
    node = pci.get(bdf)
    seen = {bdf}
    while node is not None:
        parent = node.parent
        if parent in roots:
            return ups, parent
        if parent in seen:
            break
        seen.add(parent)
        node = pci.get(parent)
        if node is not None:
            ups.append(parent)
    return ups, None
