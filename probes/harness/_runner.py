"""The one place that warms up, times, verifies and turns timings into measurements.

``execute`` runs in the child process: per size it allocates, takes ``samples`` timed samples (each
after ``warmup`` untimed operations), then checks the data in a separate, untimed step. ``assemble``
runs in the parent: statistics per set of samples and :class:`topology.Measurement`s, pure.
"""

from __future__ import annotations

import time
import traceback

from topology import LinkCapability, Measurement, Source, measured_breach

from ..core import (
    Backend,
    Item,
    Kind,
    ModeTimed,
    ProbeError,
    ProbeOutcome,
    ProbeSpec,
    RawResult,
    RawRow,
    Status,
    Waived,
    Workload,
    summarize,
)
from ._summary import cell_timing, item_conditions, summaries


def execute(backend: Backend, item: Item) -> RawResult:
    t0 = time.monotonic()

    def done(status: Status, reason: str = "", rows: tuple[RawRow, ...] = (),
             conditions: tuple[tuple[str, str], ...] = ()) -> RawResult:
        return RawResult(key=item.key, status=status, reason=reason, rows=rows, versions=backend.versions(),
                         conditions=conditions, elapsed_s=time.monotonic() - t0,
                         simulated=getattr(backend, "simulated", ""))

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
                seconds, timing, problem = _samples(workload, item)
            finally:
                workload.close()
            if problem:
                return done(Status.FAILED, f"data check failed at {size} bytes: {problem}", (),
                            session.conditions)
            bad = [s for sample in seconds for s in sample if not s > 0]
            if bad:
                return done(Status.FAILED, f"the clock measured {bad[0]!r} s at {size} bytes", (),
                            session.conditions)
            rows.append(RawRow(size=size, bytes_per_op=workload.bytes_per_op, ops=item.iters, seconds=seconds,
                               timing=timing))
    except Waived as exc:
        return done(Status.WAIVED, str(exc), (), session.conditions)
    except Exception as exc:
        return done(Status.FAILED, _failure(exc), (), session.conditions)
    finally:
        session.close()
    return done(Status.OK, "", tuple(rows), session.conditions)


Samples = tuple[tuple[float, ...], ...]
Timing = tuple[tuple[str, ...], ...]


def _samples(workload: Workload, item: Item) -> tuple[Samples, Timing, str | None]:
    """``item.samples`` timed samples, each after its untimed reset; the data checked after every sample
    (nvbandwidth) or once after them all (nccl-tests), never inside a timed window. How each channel of
    each sample was timed is read right after it was timed (a workload that times in one way says nothing)."""
    seconds: list[tuple[float, ...]] = []
    timing: list[tuple[str, ...]] = []
    for n in range(item.samples):
        workload.prepare()
        seconds.append(workload.sample(item.warmup, item.iters))
        if isinstance(workload, ModeTimed):
            timing.append(tuple(workload.last_timing))
        if workload.check_each_sample:
            problem = workload.verify()
            if problem:
                return (), (), f"sample {n + 1}: {problem}"
    if not workload.check_each_sample:
        problem = workload.verify()
        if problem:
            return (), (), problem
    return tuple(seconds), tuple(timing), None


def _failure(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return f"out of memory: {exc}" if str(exc) else "out of memory"
    if isinstance(exc, ProbeError):
        return str(exc)
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    at = f" (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})" if where else ""
    return f"{type(exc).__name__}: {exc}{at}"


def assemble(spec: ProbeSpec, item: Item, raw: RawResult, *, taken_at: float,
             cap: LinkCapability | None = None) -> ProbeOutcome:
    """Statistics and measurements from what the child timed; a result without rows is not a number, and
    one above what its path can carry (``cap``: the snapshot's links, by the physics table) is refused as
    measured: the test failed, no number joins the snapshot."""
    if raw.status is not Status.OK:
        return ProbeOutcome(test=item.test, subjects=item.subjects, status=raw.status, reason=raw.reason,
                            elapsed_s=raw.elapsed_s)
    source = Source.SIMULATED if raw.simulated else Source.MEASURED
    base = ((("profile", item.profile),) if item.profile else ()) + item_conditions(raw.conditions) + (
        (("simulated", raw.simulated),) if raw.simulated else ())

    def measurement(row: RawRow, direction: str, samples: list[float], *, value: float | None = None,
                    extra: tuple[tuple[str, str], ...] = ()) -> Measurement:
        stats = summarize(samples)
        return Measurement(
            test=spec.name, subjects=item.subjects, direction=direction,
            value=stats.median if value is None else value, unit=spec.unit, source=source, method=spec.method,
            size_bytes=row.size, stats=stats, backend=spec.backend, taken_at=taken_at, versions=raw.versions,
            conditions=base + extra,
        )

    headline: list[Measurement] = []
    sweep: list[Measurement] = []
    ranks = len(item.subjects)
    for row in raw.rows:
        if spec.kind is Kind.LATENCY:
            headline.append(measurement(row, spec.channels[0], [s[0] / row.ops for s in row.seconds]))
            continue
        if spec.kind is Kind.COLLECTIVE:
            factor = spec.bus_factor(ranks)
            for c, mode in enumerate(spec.channels):
                algbw = [spec.moved(row.size, ranks) * row.ops / s[c] for s in row.seconds]
                extra = (("mode", mode.replace("_", " ")), *cell_timing(row, c, raw.conditions))
                sweep += [measurement(row, "algbw", algbw, extra=extra),
                          measurement(row, "busbw", [a * factor for a in algbw], extra=extra)]
            continue
        per_channel = [[row.bytes_per_op * row.ops / s[c] for s in row.seconds] for c in range(len(spec.channels))]
        done = [measurement(row, d, v) for d, v in zip(spec.channels, per_channel, strict=True)]
        headline += done
        if spec.total:  # nvbandwidth: total = the sum of the directions' medians; stats of per-sample sums
            totals = [sum(values) for values in zip(*per_channel, strict=True)]
            headline.append(measurement(row, "a<->b", totals, value=sum(m.value for m in done),
                                        extra=(("total", "sum of the directions' medians (nvbandwidth)"),)))
    if spec.kind is Kind.COLLECTIVE and sweep:
        headline = list(summaries(sweep, dict(item.options).get("timing", "")))
    why = next((w for m in headline if cap is not None and source is Source.MEASURED
                and (w := measured_breach(m, cap))), "")
    if why:
        return ProbeOutcome(test=item.test, subjects=item.subjects, status=Status.FAILED, elapsed_s=raw.elapsed_s,
                            reason=f"refused as measured: {why}; the path cannot carry it")
    return ProbeOutcome(test=item.test, subjects=item.subjects, status=Status.OK, measurements=tuple(headline),
                        sweep=tuple(sweep), elapsed_s=raw.elapsed_s)
