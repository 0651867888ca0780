"""Node labels for schedulers: the estimated all-reduce bus bandwidth of the node's best group of 2, 4 and 8
GPUs, as a coarse class with hysteresis. Pure.

The figure is the cost model's (``topology.best_groups``, an all-reduce of 1 GiB, NVLink SHARP where the
switches do it): an estimate from measured rates where the snapshot has them, else theoretical ones, never
a measurement. Its class is the figure in GB/s rounded down to a power of two (``0`` below 1 GB/s):
``512`` means 512 to 1023 GB/s. A whole number, so a node affinity can ask ``Gt``/``Lt`` of it. A class
moves only when the figure passes the edge it crosses by :data:`HYSTERESIS` (10% of the edge), as the
ratio classes do: a measured rate that jitters by a few percent never flips a label.

Only the sizes the node can host get a label (a node of 4 GPUs has none for 8). A figure that rests on an
unknown fact (an unknown NVLink or PCIe path) is no figure: the label keeps the value the Node has.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from topology import Snapshot

SIZES = (2, 4, 8)
HYSTERESIS = 0.10
KEY = "allreduce-busbw-{n}"

def best_busbw(snap: Snapshot) -> dict[int, float | None]:
    """Group size -> the estimated bus bandwidth (bytes/s) of its best group, for the sizes the node can host;
    None where the estimate could not use every fact it needs. Searched once per snapshot: every sink of a
    pass gets the same snapshot object, so one search serves all."""
    from topology import per_snapshot

    return dict(per_snapshot(snap, best_busbw, lambda: _best_busbw(snap)))


def _best_busbw(snap: Snapshot) -> dict[int, float | None]:
    # the cost model and the search, here and not above: ``cluster`` reads only KEY and SIZES (its imports)
    from topology import PLACEMENT_SIZE_BYTES, CostModel, best_groups

    model = CostModel(snap)
    out: dict[int, float | None] = {}
    for n in SIZES:
        placement = best_groups(model, n, size_bytes=PLACEMENT_SIZE_BYTES, top=1)
        if not placement.groups:
            break  # fewer GPUs than n (lost and MIG GPUs are not counted): no larger size either
        estimate = placement.groups[0].estimate
        out[n] = None if estimate.unknown else estimate.busbw_bytes_per_second
    return out


def _edge(k: int) -> float:
    return float(1 << k) if k >= 0 else 0.0


def busbw_class(bytes_per_second: float, previous: str | None) -> str:
    """The power-of-two GB/s class of a bus bandwidth, moving away from ``previous`` only past an edge by
    the hysteresis margin."""
    gbs = bytes_per_second / 1e9
    plain = int(_edge(math.floor(math.log2(gbs)))) if gbs >= 1 else 0
    prev = int(previous) if previous is not None and previous.isdigit() else None
    if prev is None or (prev and prev & (prev - 1)):  # none, or not a class we write
        return str(plain)
    up = max((1 << k for k in range(64) if gbs >= (1 << k) * (1 + HYSTERESIS)), default=0)
    if up > prev:
        return str(up)
    down = max((1 << k for k in range(64) if gbs >= (1 << k) * (1 - HYSTERESIS)), default=0)
    return str(down) if down < prev else str(prev)


def busbw_labels(snap: Snapshot, prefix: str, previous: Mapping[str, str]) -> dict[str, str | None]:
    """``allreduce-busbw-N`` -> its class (None: keep the Node's value)."""
    out: dict[str, str | None] = {}
    for n, value in best_busbw(snap).items():
        key = KEY.format(n=n)
        out[key] = None if value is None else busbw_class(value, previous.get(f"{prefix}/{key}"))
    return out
