"""Numbers on the graph: a measurement with its statistics and the conditions it was taken under,
and named matrices of pairwise values (hwloc's distance kinds)."""

from __future__ import annotations

import enum

from ._provenance import Source
from ._record import Record

# The probe tests whose numbers are one GPU's copy bandwidth to another: what the fabric and the all-reduce
# estimate take as a measured GPU-to-GPU rate.
P2P_COPY_TESTS = ("device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce")


class MatrixKind(enum.Flag):
    """One source flag and one meaning flag, as hwloc's distance kinds."""

    FROM_OS = enum.auto()
    THEORETICAL = enum.auto()
    MEASURED = enum.auto()
    BANDWIDTH = enum.auto()
    LATENCY = enum.auto()
    HOPS = enum.auto()


class Stats(Record):
    """Statistics of a measurement's samples."""

    __slots__ = __match_args__ = ("median", "p5", "p95", "cv", "samples")
    median: float
    p5: float
    p95: float
    cv: float  # coefficient of variation, stdev / mean
    samples: tuple[float, ...]

    def __init__(self, *, median: float, p5: float, p95: float, cv: float, samples: tuple[float, ...]) -> None:
        self._fill(locals())


class Measurement(Record):
    """A number on the graph, between ``subjects`` (entity ids), with where it comes from."""

    __slots__ = __match_args__ = ("test", "subjects", "direction", "value", "unit", "source", "method", "size_bytes",
                                  "stats", "backend", "taken_at", "versions", "conditions")
    test: str
    subjects: tuple[str, ...]
    direction: str  # "a->b", "bidirectional", "all", ...
    value: float
    unit: str  # "bytes_per_second", "seconds"
    source: Source
    method: str  # ce-write, ce-read, sm, nccl, gloo, memcpy, perftest, pointer-chase
    size_bytes: int | None
    stats: Stats | None
    backend: str | None
    taken_at: float | None  # unix seconds
    versions: tuple[tuple[str, str], ...]
    conditions: tuple[tuple[str, str], ...]  # what it was taken under: NUMA placement, clocks, latch

    def __init__(self, *, test: str, subjects: tuple[str, ...], direction: str, value: float, unit: str, source: Source,
                 method: str, size_bytes: int | None = None, stats: Stats | None = None, backend: str | None = None,
                 taken_at: float | None = None, versions: tuple[tuple[str, str], ...] = (),
                 conditions: tuple[tuple[str, str], ...] = ()) -> None:
        self._fill(locals())


class Matrix(Record):
    """A named square matrix over ids (NUMA distances, NVLink bandwidth, ...)."""

    __slots__ = __match_args__ = ("name", "kind", "unit", "ids", "values")
    name: str  # "numa_distance", "nvlink_bandwidth"
    kind: MatrixKind
    unit: str
    ids: tuple[str, ...]
    values: tuple[tuple[float, ...], ...]

    def __init__(self, *, name: str, kind: MatrixKind, unit: str, ids: tuple[str, ...],
                 values: tuple[tuple[float, ...], ...]) -> None:
        self._fill(locals())

    def get(self, a: str, b: str) -> float | None:
        try:
            return self.values[self.ids.index(a)][self.ids.index(b)]
        except ValueError:
            return None
