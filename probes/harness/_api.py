"""Entry points: run a profile on a snapshot, join the results to it, and the self-test."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Collection
from typing import Any

from topology import Gpu, LinkCapability, Problem, Record, Snapshot, replace, to_dict, with_measurements

from ..core import (
    SELFTEST,
    Capabilities,
    ProbeOutcome,
    ProbeReport,
    Profile,
    Status,
    choose_backend,
    profile,
    spec,
    specs_for,
    with_collective_timing,
)
from ._plan import make_plan
from ._process import ProbeProcess
from ._runner import assemble

Progress = Callable[[int, int, str], None]  # (done, total, current item key)
# v2: collectives report out-of-place and in-place rows (each sweep row's conditions name its ``mode``) and
# nccl-tests' "Avg bus bandwidth" (direction ``avg_busbw``); a bidirectional total is the sum of the two
# directions' medians (nvbandwidth's rule); measurements from a test double have source ``simulated``.
REPORT_SCHEMA = "topolink.probe/v2"
READABLE_REPORT_SCHEMAS = ("topolink.probe/v1", REPORT_SCHEMA)


def run_probes(snap: Snapshot, *, profile_name: str | Profile = "quick", backend: str = "auto",
               tests: Collection[str] | None = None, force: bool = False, progress: Progress | None = None,
               process: ProbeProcess | None = None, collective_timing: str | None = None) -> ProbeReport:
    """Plan and run in one child process (the one given, or a new one), and assemble. Never raises for a
    probe that fails; raises :class:`ProbeError` only for a request that cannot be planned (unknown
    test/profile/timing). ``collective_timing`` (``graph``: nccl-tests -G 1; ``stream``: -G 0) replaces
    the profile's own for the NCCL collectives."""
    t0 = time.monotonic()
    prof = profile_name if isinstance(profile_name, Profile) else profile(profile_name)
    prof = with_collective_timing(prof, collective_timing)
    chosen = process.backend if process is not None else choose_backend(backend, snap)
    notes: list[str] = []
    if backend == "auto" and chosen == "cpu" and snap.gpus:
        notes.append("the snapshot has GPUs but CuPy is not installed (pip install 'topolink[cuda]'): "
                     "ran the cpu backend")
    with contextlib.ExitStack() as owned:
        if process is None:
            process = owned.enter_context(ProbeProcess(chosen))
        caps = process.capabilities()
        if backend == "auto" and chosen == "cuda" and caps.error:
            notes.append(f"cuda backend unavailable ({caps.error}); ran the cpu backend")
            process = owned.enter_context(ProbeProcess("cpu"))
            chosen, caps = "cpu", process.capabilities()
        plan = make_plan(snap, prof, caps, tests=tests, force=force)
        cap = LinkCapability(snap)
        total = len(plan.items)
        outcomes = [ProbeOutcome(test=w.test, subjects=w.subjects, status=Status.WAIVED, reason=w.reason)
                    for w in plan.waived]
        for done, item in enumerate(plan.items):
            if progress:
                progress(done, total, item.key)
            raw = process.run(item)
            outcomes.append(assemble(spec(chosen, item.test), item, raw, taken_at=time.time(), cap=cap))
        if progress and total:
            progress(total, total, "")
    order = {s.name: n for n, s in enumerate(specs_for(chosen))}
    outcomes.sort(key=lambda o: order.get(o.test, len(order)))
    return ProbeReport(profile=prof.name, backend=chosen, outcomes=tuple(outcomes), versions=caps.versions,
                       elapsed_s=time.monotonic() - t0, notes=tuple(notes))


def apply_report(snap: Snapshot, report: ProbeReport) -> Snapshot:
    """The snapshot with the report's measurements joined, and each failed test as a problem.

    Waived tests add nothing: they are not faults of the node (no P2P, no NIC), and their reasons are in
    the report. Only numbers that were timed become measurements.
    """
    joined = with_measurements(snap, report.measurements)
    failed = tuple(Problem(source="probe", subject=f"{o.test}[{','.join(o.subjects)}]", message=o.reason)
                   for o in report.outcomes if o.status is Status.FAILED)
    return replace(joined, problems=joined.problems + failed) if failed else joined


def report_to_dict(report: ProbeReport, snap: Snapshot) -> dict[str, Any]:
    """The JSON document of ``topolink probe --format json``: outcomes, and the snapshot with the results."""
    return {
        "schema": REPORT_SCHEMA, "profile": report.profile, "backend": report.backend,
        "elapsed_s": round(report.elapsed_s, 3), "ran": report.ran, "notes": list(report.notes),
        "versions": dict(report.versions),
        "outcomes": [_plain(dataclasses.asdict(o)) for o in report.outcomes],
        "snapshot": to_dict(apply_report(snap, report)),
    }


def _plain(value: Any) -> Any:
    """``value`` with the model's records in it (an outcome's measurements) as dicts of their fields, as
    ``dataclasses.asdict`` leaves the outcome's own."""
    if isinstance(value, Record):
        return {name: _plain(getattr(value, name)) for name in value.__match_args__}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    return value


def report_json(report: ProbeReport, snap: Snapshot) -> str:
    return json.dumps(report_to_dict(report, snap), indent=2, allow_nan=False)


def snapshot_from_caps(caps: Capabilities, node: str = "localhost") -> Snapshot:
    """A bare snapshot of what a backend sees (its GPUs), for a self-test without discovery."""
    gpus = tuple(Gpu(id=d.id, index=d.ordinal, name=d.name or None) for d in caps.devices)
    return Snapshot(node=node, gpus=gpus)


@dataclasses.dataclass(frozen=True, slots=True)
class SelftestLine:
    test: str
    verdict: str  # PASS | FAIL | SKIP
    detail: str


def selftest(snap: Snapshot | None = None, *, gpu: bool = True,
             progress: Progress | None = None) -> tuple[tuple[SelftestLine, ...], ProbeReport]:
    """Every test of the backend at tiny sizes: PASS when every run of it produced a number, FAIL when
    one failed, SKIP (with the reason) when none could run here."""
    backend = "cuda" if gpu else "cpu"
    with ProbeProcess(backend) as process:
        caps = process.capabilities()
        base = snap if snap is not None else Snapshot(node="localhost")
        if gpu and not base.gpus:  # discovery found none (or was not run): test what CUDA sees
            base = replace(base, gpus=snapshot_from_caps(caps).gpus)
        report = run_probes(base, profile_name=SELFTEST, backend=backend, progress=progress, process=process)
    lines = []
    for s in specs_for(backend):
        outs = [o for o in report.outcomes if o.test == s.name]
        failed = [o for o in outs if o.status is Status.FAILED]
        ok = [o for o in outs if o.status is Status.OK]
        if failed:
            lines.append(SelftestLine(s.name, "FAIL", failed[0].reason))
        elif ok:
            lines.append(SelftestLine(s.name, "PASS", f"{len(ok)} run(s), {sum(o.elapsed_s for o in ok):.1f} s"))
        else:
            why = outs[0].reason if outs else "not planned"
            lines.append(SelftestLine(s.name, "SKIP", why))
    return tuple(lines), report
