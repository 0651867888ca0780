"""Numbers on the graph: a measurement with its statistics and the conditions it was taken under,
and named matrices of pairwise values (hwloc's distance kinds)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ._provenance import Source

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Stats:
    """Statistics of a measurement's samples."""

    median: float
    p5: float
    p95: float
    cv: float  # coefficient of variation, stdev / mean
    samples: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """A number on the graph, between ``subjects`` (entity ids), with where it comes from."""

    test: str
    subjects: tuple[str, ...]
    direction: str  # "a->b", "bidirectional", "all", ...
    value: float
    unit: str  # "bytes_per_second", "seconds"
    source: Source
    method: str  # ce-write, ce-read, sm, nccl, gloo, memcpy, perftest, pointer-chase
    size_bytes: int | None = None
    stats: Stats | None = None
    backend: str | None = None
    taken_at: float | None = None  # unix seconds
    versions: tuple[tuple[str, str], ...] = ()
    conditions: tuple[tuple[str, str], ...] = ()  # what it was taken under: NUMA placement, clocks, latch


@dataclass(frozen=True, slots=True, kw_only=True)
class Matrix:
    """A named square matrix over ids (NUMA distances, NVLink bandwidth, ...)."""

    name: str  # "numa_distance", "nvlink_bandwidth"
    kind: MatrixKind
    unit: str
    ids: tuple[str, ...]
    values: tuple[tuple[float, ...], ...]

    def get(self, a: str, b: str) -> float | None:
        try:
            return self.values[self.ids.index(a)][self.ids.index(b)]
        except ValueError:
            return None
