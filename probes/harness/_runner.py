"""The one place that warms up, times, verifies and turns timings into measurements.

``execute`` runs in the child process: per size it allocates, takes ``samples`` timed samples (each
after ``warmup`` untimed operations), then checks the data in a separate, untimed step. ``assemble``
runs in the parent: statistics per set of samples and :class:`topology.Measurement`s, pure.
"""

from __future__ import annotations

import time
import traceback

from topology import Measurement, Source

from ..core import (
    Backend,
    Item,
    Kind,
    ProbeError,
    ProbeOutcome,
    ProbeSpec,
    RawResult,
    RawRow,
    Status,
    Waived,
    summarize,
)


def execute(backend: Backend, item: Item) -> RawResult:
    t0 = time.monotonic()

    def done(status: Status, reason: str = "", rows: tuple[RawRow, ...] = (),
             conditions: tuple[tuple[str, str], ...] = ()) -> RawResult:
        return RawResult(key=item.key, status=status, reason=reason, rows=rows, versions=backend.versions(),
                         conditions=conditions, elapsed_s=time.monotonic() - t0)

    try:
        session = backend.open(item)
    except Waived as exc:
        return done(Status.WAIVED, str(exc))
    except Exception as exc:  # a child reports every failure as data, never dies of it
        return done(Status.FAILED, _failure(exc))
    rows: list[RawRow] = []
    try:
        for size in item.sizes:
            workload = session.workload(size)
            try:
                seconds = tuple(workload.sample(item.warmup, item.iters) for _ in range(item.samples))
                problem = workload.verify()
            finally:
                workload.close()
            if problem:
                return done(Status.FAILED, f"data check failed at {size} bytes: {problem}", (),
                            session.conditions)
            bad = [s for sample in seconds for s in sample if not s > 0]
            if bad:
                return done(Status.FAILED, f"the clock measured {bad[0]!r} s at {size} bytes", (),
                            session.conditions)
            rows.append(RawRow(size=size, bytes_per_op=workload.bytes_per_op, ops=item.iters, seconds=seconds))
    except Waived as exc:
        return done(Status.WAIVED, str(exc), (), session.conditions)
    except Exception as exc:
        return done(Status.FAILED, _failure(exc), (), session.conditions)
    finally:
        session.close()
    return done(Status.OK, "", tuple(rows), session.conditions)


def _failure(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return f"out of memory: {exc}" if str(exc) else "out of memory"
    if isinstance(exc, ProbeError):
        return str(exc)
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})" if where else ""
    return f"{type(exc).__name__}: {exc}{at}"


def assemble(spec: ProbeSpec, item: Item, raw: RawResult, *, taken_at: float) -> ProbeOutcome:
    """Statistics and measurements from what the child timed; a result without rows is not a number."""
    if raw.status is not Status.OK:
        return ProbeOutcome(test=item.test, subjects=item.subjects, status=raw.status, reason=raw.reason,
                            elapsed_s=raw.elapsed_s)

    def measurement(row: RawRow, direction: str, samples: list[float]) -> Measurement:
        stats = summarize(samples)
        return Measurement(
            test=spec.name, subjects=item.subjects, direction=direction, value=stats.median, unit=spec.unit,
            source=Source.MEASURED, method=spec.method, size_bytes=row.size, stats=stats, backend=spec.backend,
            taken_at=taken_at, versions=raw.versions, conditions=raw.conditions,
        )

    headline: list[Measurement] = []
    sweep: list[Measurement] = []
    ranks = len(item.subjects)
    for row in raw.rows:
        if spec.kind is Kind.LATENCY:
            headline.append(measurement(row, spec.channels[0], [s[0] / row.ops for s in row.seconds]))
            continue
        if spec.kind is Kind.COLLECTIVE:
            algbw = [spec.moved(row.size, ranks) * row.ops / s[0] for s in row.seconds]
            factor = spec.bus_factor(ranks)
            sweep += [measurement(row, "algbw", algbw), measurement(row, "busbw", [a * factor for a in algbw])]
            continue
        per_channel = [[row.bytes_per_op * row.ops / s[c] for s in row.seconds] for c in range(len(spec.channels))]
        headline += [measurement(row, d, v) for d, v in zip(spec.channels, per_channel, strict=True)]
        if spec.total:
            totals = [sum(values) for values in zip(*per_channel, strict=True)]
            headline.append(measurement(row, "a<->b", totals))
    if spec.kind is Kind.COLLECTIVE and sweep:
        headline = list(peak(sweep))
    return ProbeOutcome(test=item.test, subjects=item.subjects, status=Status.OK, measurements=tuple(headline),
                        sweep=tuple(sweep), elapsed_s=raw.elapsed_s)


def peak(sweep: tuple[Measurement, ...] | list[Measurement]) -> tuple[Measurement, ...]:
    """The busbw row with the highest median, and the algbw row of the same size: the headline of a
    sweep (nccl-tests' "Avg bus bandwidth" is a mean over sizes, never reported as a peak)."""
    bus = [m for m in sweep if m.direction == "busbw"]
    if not bus:
        return ()
    best = max(bus, key=lambda m: m.value)
    alg = [m for m in sweep if m.direction == "algbw" and m.size_bytes == best.size_bytes]
    return (best, *alg)
