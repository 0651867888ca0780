"""Measured/theoretical ratios, bandwidth classes with hysteresis, and per-GPU link degradation. Pure.

Classes: ``full`` (ratio >= 0.75), ``reduced`` (0.40 to 0.75), ``low`` (below 0.40), where the ratio is the
slowest measured rate of its kind over what the links allow at their maximum generation and width, from the
figures of the ``full`` profile only: ``quick``'s read below it on fast links and are not classed.
A class moves only when the ratio passes the edge it crosses by ``HYSTERESIS`` (10% of the edge): +/-5%
noise around an edge never flips it, a real drop moves it on the first pass that measures it.

Degradation of a GPU (links only, never a guess):

- ``pcie-width``: the link trained to fewer lanes than the GPU supports.
- ``nvlink-down``: fewer active NVLinks than another GPU of the same product in its island has (NVML
  lists inactive links, so a peer with more shows what the board wires); on a node with NVSwitches, a
  GPU with no active NVLink at all while GPUs of its product have some.
- ``pcie-slow``: a current PCIe generation below the maximum counts only when a probe's host copy for
  that GPU ran far below what the maximum allows (ratio < ``SLOW_UNDER_LOAD``): NVIDIA GPUs drop the link
  generation at idle to save power and raise it under load. Any profile's host copy counts here: 0.60 is far
  below what a 64 MiB copy (quick's) loses to per-copy overhead (an estimate; not yet measured on a GPU).
- ``fabric-degraded-bw``, ``fabric-route-unhealthy``, ``fabric-config``: the NVLink fabric's health mask says so
  (GB200/GB300; ``_fabric_health``), read only where the fabric facts are known.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable

from topology import (
    Aspect,
    Knowledge,
    LinkCapability,
    LinkKind,
    Measurement,
    Snapshot,
    Source,
    nvlink_islands,
)

from ._fabric_health import fabric_reasons

CLASSES = ("low", "reduced", "full")
EDGES = (0.40, 0.75)  # lower edges of "reduced" and "full"
HYSTERESIS = 0.10
SLOW_UNDER_LOAD = 0.60


class BwKind(enum.StrEnum):
    GPU_GPU = "gpu-gpu"
    HOST_GPU = "host-gpu"
    ALL_REDUCE = "allreduce"


_D2D = ("device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce")
_H2D = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce")


def kind_of(m: Measurement) -> BwKind | None:
    if m.source is not Source.MEASURED or m.unit != "bytes_per_second" or m.value <= 0:
        return None
    if m.test in _D2D and len(m.subjects) == 2:
        return BwKind.GPU_GPU
    if m.test in _H2D and len(m.subjects) == 2:
        return BwKind.HOST_GPU
    if m.test == "all_reduce" and m.method == "nccl" and m.direction == "busbw" and len(m.subjects) > 1:
        return BwKind.ALL_REDUCE
    return None


def ratios(snap: Snapshot, *, every_profile: bool = False) -> dict[BwKind, list[tuple[Measurement, float]]]:
    """Every measured rate with its ratio to the capability, by kind: only the figures of a profile that is
    compared with the theoretical rate (``full``; never ``quick``'s, which reads below it on fast links:
    ``LinkCapability.compares``), unless ``every_profile``."""
    cap = LinkCapability(snap)
    out: dict[BwKind, list[tuple[Measurement, float]]] = defaultdict(list)
    for m in snap.measurements:
        kind = kind_of(m) if every_profile or cap.compares(m) else None
        peak = cap.of(m) if kind is not None else None
        if kind is not None and peak:
            out[kind].append((m, m.value / peak))
    return out


def node_ratio(kind: BwKind, found: Iterable[tuple[Measurement, float]]) -> float | None:
    """The slowest pair or GPU; for all-reduce, the run over the most GPUs (the whole node)."""
    items = list(found)
    if not items:
        return None
    if kind is BwKind.ALL_REDUCE:
        widest = max(len(m.subjects) for m, _ in items)
        items = [(m, r) for m, r in items if len(m.subjects) == widest]
    return min(r for _, r in items)


_RANK = {c: i for i, c in enumerate(CLASSES)}
_UP = tuple(e * (1 + HYSTERESIS) for e in EDGES)
_DOWN = tuple(e * (1 - HYSTERESIS) for e in EDGES)


def classify(ratio: float, previous: str | None) -> str:
    """The class for ``ratio``, moving away from ``previous`` only past an edge by the hysteresis margin."""
    prev = _RANK.get(previous) if previous is not None else None
    if prev is None:
        return CLASSES[sum(ratio >= e for e in EDGES)]
    up = sum(ratio >= e for e in _UP)  # the highest class the ratio clears with the margin
    if prev < up:
        return CLASSES[up]
    down = sum(ratio >= e for e in _DOWN)  # the lowest class the ratio has not fallen out of
    return CLASSES[down] if prev > down else CLASSES[prev]


def nvlink_counts(snap: Snapshot) -> dict[str, int]:
    """Active NVLinks per GPU (to GPUs and to NVSwitches)."""
    counts = {g.id: 0 for g in snap.gpus}
    for link in snap.links:
        if link.kind is LinkKind.NVLINK:
            for end in (link.a, link.b):
                if end in counts:
                    counts[end] += link.count
    return counts


def degradation(snap: Snapshot, knowledge: Knowledge | None = None) -> dict[str, tuple[str, ...]]:
    """Reasons per degraded GPU (absent: not degraded or not known to be). What is known is ``knowledge``
    when given (the agent's, across passes), else what the snapshot marks unknown."""
    k = snap.knowledge() if knowledge is None else knowledge
    reasons: defaultdict[str, set[str]] = defaultdict(set)
    for g in snap.gpus:
        p = g.pcie
        if p and k.knows(g.id, Aspect.PCIE_LINK) and p.current_width and p.max_width and p.current_width < p.max_width:
            reasons[g.id].add("pcie-width")
    _nvlink_down(snap, k, reasons)
    for g in snap.gpus:
        found = fabric_reasons(g.fabric.health_mask) if g.fabric is not None and not g.lost else ()
        if found and k.knows(g.id, Aspect.FABRIC):
            reasons[g.id].update(found)
    host = ratios(snap, every_profile=True).get(BwKind.HOST_GPU, [])  # far below (< 0.6) in any profile
    for g in snap.gpus:
        p = g.pcie
        if not (p and p.current_gen and p.max_gen and p.current_gen < p.max_gen):
            continue
        mine = [r for m, r in host if m.subjects[1] == g.id]
        if mine and min(mine) < SLOW_UNDER_LOAD:
            reasons[g.id].add("pcie-slow")
    return {gid: tuple(sorted(r)) for gid, r in sorted(reasons.items())}


def _nvlink_down(snap: Snapshot, k: Knowledge, reasons: defaultdict[str, set[str]]) -> None:
    counts = nvlink_counts(snap)
    product = {g.id: g.name or "" for g in snap.gpus}
    known = {g.id for g in snap.gpus if not g.lost and k.knows(g.id, Aspect.NVLINKS)}
    for island in nvlink_islands(snap):
        members = [gid for gid in island.gpus if gid in known]
        for gid in members:
            peers = [counts[o] for o in members if product[o] == product[gid]]
            if peers and counts[gid] < max(peers):
                reasons[gid].add("nvlink-down")
    if snap.nvswitches:
        linked = {product[g] for g in known if counts[g] > 0}
        for gid in known:
            if counts[gid] == 0 and product[gid] in linked:
                reasons[gid].add("nvlink-down")
