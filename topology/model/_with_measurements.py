"""``with_measurements``: join measurements to a snapshot, returning a new one (nothing is mutated).

A measurement replaces an earlier one of the same kind between the same subjects (same test,
subjects, direction, method and backend), whatever its buffer size: the newest run is the one that
counts. Everything else is kept in order, the new ones appended after.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ._entities import Snapshot
from ._measurement import Measurement
from ._record import replace

MeasurementKey = tuple[str, tuple[str, ...], str, str, str | None]


def measurement_key(m: Measurement) -> MeasurementKey:
    return (m.test, m.subjects, m.direction, m.method, m.backend)


def with_measurements(snap: Snapshot, measurements: Iterable[Measurement]) -> Snapshot:
    """A new snapshot carrying ``measurements``; a value that is not a finite number is refused
    (``ValueError``): JSON cannot carry it, and a number that was never taken must not look like one."""
    new = tuple(measurements)
    for m in new:
        if not math.isfinite(m.value):
            raise ValueError(f"measurement {m.test} {m.subjects}: value {m.value!r} is not finite")
    keys = {measurement_key(m) for m in new}
    kept = tuple(m for m in snap.measurements if measurement_key(m) not in keys)
    return replace(snap, measurements=kept + new)
