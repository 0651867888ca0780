"""``all_reduce_estimate``: a ring all-reduce's time from its slowest edge, and where that number came from.

A ring moves ``2(n-1)/n x bytes`` through every edge (nccl-tests' bus bandwidth factor), so the time is
that over the slowest edge's bandwidth. An edge's bandwidth is the measured unidirectional
device-to-device copy when the snapshot has one (the faster of read and write), else the theoretical
rate of ``LinkCapability.between`` (NVLink, else the slower PCIe link at its maximum generation and width).

It ignores that hops share links (a switch's uplink, the SMP link) and takes the ring order as given:
:func:`collective_estimate` (``_cost``) routes every hop over the physical links, shares their bandwidth,
chooses the ring and names the limiting link; placement uses that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..fabric._capability import LinkCapability
from ..model._entities import Snapshot
from ..model._measurement import P2P_COPY_TESTS
from ..model._provenance import Source


@dataclass(frozen=True, slots=True, kw_only=True)
class AllReduceEstimate:
    seconds: float | None  # None when an edge has no known bandwidth
    bottleneck: tuple[str, str] | None
    bytes_per_second: float | None
    source: Source | None  # of the bottleneck's number; a ring mixing sources reports the slowest edge's


def _edge(snap: Snapshot, cap: LinkCapability, a: str, b: str) -> tuple[float, Source] | None:
    measured = [m.value for m in snap.measurements
                if m.test in P2P_COPY_TESTS and set(m.subjects) == {a, b} and m.unit == "bytes_per_second"
                and m.source is Source.MEASURED]
    if measured:
        return max(measured), Source.MEASURED
    rate = cap.between(a, b)
    return (rate, Source.THEORETICAL) if rate else None


def all_reduce_estimate(snap: Snapshot, gpus: Sequence[str], size_bytes: int) -> AllReduceEstimate:
    """Ring all-reduce of ``size_bytes`` over ``gpus`` in the given ring order."""
    n = len(gpus)
    if n < 2:
        return AllReduceEstimate(seconds=0.0, bottleneck=None, bytes_per_second=None, source=None)
    cap = LinkCapability(snap)
    slowest: tuple[float, Source, tuple[str, str]] | None = None
    for i, a in enumerate(gpus):
        b = gpus[(i + 1) % n]
        edge = _edge(snap, cap, a, b)
        if edge is None:
            return AllReduceEstimate(seconds=None, bottleneck=(a, b), bytes_per_second=None, source=None)
        if slowest is None or edge[0] < slowest[0]:
            slowest = (edge[0], edge[1], (a, b))
    assert slowest is not None
    rate, source, pair = slowest
    moved = 2 * (n - 1) / n * size_bytes
    return AllReduceEstimate(seconds=moved / rate, bottleneck=pair, bytes_per_second=rate, source=source)
