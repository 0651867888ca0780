"""The probe's own records: a plan (items to run, tests waived), what a child process hands back, and
the outcome of each planned test. All frozen; items and raw results cross the process boundary as JSON."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from topology import Measurement


class Kind(enum.StrEnum):
    COPY = "copy"  # bytes per second, counted once per copy
    LATENCY = "latency"  # seconds per dependent access
    COLLECTIVE = "collective"  # algbw and busbw over a size sweep
    RDMA = "rdma"  # perftest over an RDMA NIC


class Status(enum.StrEnum):
    OK = "ok"
    WAIVED = "waived"  # cannot run here, and why: never a number
    FAILED = "failed"  # tried and did not finish: overran its budget, out of memory, bad data


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One endpoint of a planned probe: an entity of the snapshot, resolved for the backend."""

    id: str  # GPU bus id, ``numa<N>``, NIC id; ``host`` for host memory on no known node
    kind: str  # gpu | host | nic
    index: int | None = None  # CUDA ordinal of a GPU, OS index of a NUMA node (None: not bound)
    cpus: tuple[int, ...] = ()  # where a host thread runs for a host target
    name: str = ""  # a NIC's device name (mlx5_0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Item:
    """One test between one set of endpoints, with its sizes, repetitions and budgets."""

    key: str
    test: str
    targets: tuple[Target, ...]
    sizes: tuple[int, ...]
    warmup: int  # untimed operations before every timed sample
    iters: int  # timed operations per sample
    samples: int
    wall_budget_s: float
    memory_budget_bytes: int
    options: tuple[tuple[str, str], ...] = ()  # choices the plan made for the backend (RDMA registration)
    background: tuple[Target, ...] = ()  # endpoints that only add traffic while the targets are timed
    profile: str = ""  # the profile that planned it: every figure it gives says so (``conditions.profile``)

    @property
    def subjects(self) -> tuple[str, ...]:
        return tuple(t.id for t in self.targets)


@dataclass(frozen=True, slots=True, kw_only=True)
class Waiver:
    test: str
    subjects: tuple[str, ...]
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    profile: str
    backend: str
    items: tuple[Item, ...] = ()
    waived: tuple[Waiver, ...] = ()
    startup_budget_s: float = 120.0  # a child's imports and device initialisation, before its first item


@dataclass(frozen=True, slots=True, kw_only=True)
class RawRow:
    """One size of one item: seconds per sample and per channel (a bidirectional copy has two)."""

    size: int  # the buffer size asked for
    bytes_per_op: int  # bytes one operation moves on one channel, as counted (after any truncation)
    ops: int  # timed operations per sample
    seconds: tuple[tuple[float, ...], ...]  # [sample][channel]
    # [sample][channel]: how each channel of each sample was timed, recorded as it was (an NCCL cell's
    # ``graph`` or ``stream``); empty for a test timed one way only
    timing: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class RawResult:
    key: str
    status: Status
    reason: str = ""
    rows: tuple[RawRow, ...] = ()
    versions: tuple[tuple[str, str], ...] = ()
    conditions: tuple[tuple[str, str], ...] = ()
    elapsed_s: float = 0.0
    simulated: str = ""  # why the clock was not a real device's (a test double); empty when it was


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeOutcome:
    """What became of one planned test between one set of endpoints.

    Every planned test gets one, run or not; only timed numbers become :class:`topology.Measurement`s
    (``source=measured``, status ``ok``). A waived or failed test has a reason and no measurement, so a
    consumer of the snapshot never meets a 0 or a NaN standing for "not measured".
    """

    test: str
    subjects: tuple[str, ...]
    status: Status
    reason: str = ""
    measurements: tuple[Measurement, ...] = ()  # headline numbers: these join the snapshot
    sweep: tuple[Measurement, ...] = ()  # every size of a sweep, for the report
    elapsed_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeReport:
    profile: str
    backend: str
    outcomes: tuple[ProbeOutcome, ...] = ()
    versions: tuple[tuple[str, str], ...] = ()
    elapsed_s: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def measurements(self) -> tuple[Measurement, ...]:
        return tuple(m for o in self.outcomes for m in o.measurements)

    @property
    def ran(self) -> bool:
        """At least one test produced a number."""
        return any(o.status is Status.OK for o in self.outcomes)


def item_to_dict(item: Item) -> dict[str, Any]:
    return asdict(item)


def _targets(raw: Any) -> tuple[Target, ...]:
    return tuple(Target(**{**t, "cpus": tuple(t["cpus"])}) for t in raw)


def item_from_dict(d: Mapping[str, Any]) -> Item:
    options = tuple((str(k), str(v)) for k, v in d.get("options", ()))
    return Item(**{**d, "targets": _targets(d["targets"]), "background": _targets(d.get("background", ())),
                   "sizes": tuple(d["sizes"]), "options": options})


def raw_to_dict(raw: RawResult) -> dict[str, Any]:
    return asdict(raw)


def raw_from_dict(d: Mapping[str, Any]) -> RawResult:
    rows = tuple(
        RawRow(size=r["size"], bytes_per_op=r["bytes_per_op"], ops=r["ops"],
               seconds=tuple(tuple(float(x) for x in s) for s in r["seconds"]),
               timing=tuple(tuple(str(x) for x in s) for s in r.get("timing", ())))
        for r in d["rows"]
    )
    def pairs(key: str) -> tuple[tuple[str, str], ...]:
        return tuple((str(k), str(v)) for k, v in d.get(key, ()))

    return RawResult(key=d["key"], status=Status(d["status"]), reason=d.get("reason", ""), rows=rows,
                     versions=pairs("versions"), conditions=pairs("conditions"),
                     elapsed_s=float(d.get("elapsed_s", 0.0)), simulated=str(d.get("simulated", "")))
