"""One probe pass for the agent: the probes package's plan and child process, one item at a time, with
NVML asked before each item whether the GPUs it touches are idle (a busy GPU is skipped, with why, and so
is one whose busy state NVML cannot read: unknown is never idle).

``topolink probe`` asks once, at plan time; a daemon that measures for hours must ask again before every
item, since a job may have started on the GPU since. The pass keeps one child process (CuPy imported and
CUDA started once, capabilities asked there too), sends it one budgeted item at a time, and the idle check
does not count that child's own CUDA context as a job; an item that overruns its budget is killed with
the child, and the next item starts a fresh one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable, Collection

import probes
from probes.core import BUSY_ANY, busy_of, is_unknown, spec, specs_for, unknown, with_collective_timing
from topology import LinkCapability, Snapshot

Busy = Callable[[], dict[str, str]]  # probes.read_busy's answer: bus id -> why busy ("" when idle)
ANY = BUSY_ANY  # the key of an answer for every GPU
BUSY = "busy"  # the outcome status of an item skipped because a GPU was in use
BUSY_UNKNOWN = "busy_unknown"  # ... because NVML could not say whether a GPU was in use: never taken for idle


def nvml_busy(library: str | None) -> Busy:
    """Asks NVML (the profile's library when one is named) for compute processes and utilisation."""

    def ask() -> dict[str, str]:
        from probes import read_busy

        from ..discovery.access import NvmlError, open_nvml

        try:
            port = open_nvml(library)  # puts the right library into pynvml, then read_busy nests a session
        except NvmlError:
            return {}  # no NVML: nothing can be running on a GPU it manages
        try:
            return read_busy()
        except Exception as exc:  # pynvml raises more than NVMLError (a library version mismatch)
            return {ANY: unknown("asking NVML", exc)}
        finally:
            with contextlib.suppress(NvmlError):
                port.close()

    return ask


@dataclasses.dataclass(frozen=True, slots=True)
class Item:
    test: str
    subjects: tuple[str, ...]
    status: str  # ok | waived | failed | busy | busy_unknown
    reason: str = ""


def run_pass(snap: Snapshot, *, profile: str, backend: str, tests: Collection[str] | None, busy: Busy,
             stop: threading.Event, item_timeout_s: float | None = None,
             on_item: Callable[[Item], None] = lambda i: None,
             collective_timing: str | None = None) -> probes.ProbeReport:
    """Plan, then for each item: stop requested -> end; a GPU busy -> skip; else run it in the pass's child.
    ``collective_timing`` replaces the profile's (``graph``: nccl-tests -G 1; ``stream``: -G 0)."""
    from probes.harness import ProbeProcess, assemble  # the harness only where a pass runs (probes on)

    t0 = time.monotonic()
    prof = with_collective_timing(probes.profile(profile), collective_timing)
    chosen = probes.choose_backend(backend, snap)
    with contextlib.ExitStack() as stack:
        process = stack.enter_context(ProbeProcess(chosen))
        caps = process.capabilities()
        if backend == "auto" and chosen == "cuda" and caps.error:
            process = stack.enter_context(ProbeProcess("cpu"))
            chosen, caps = "cpu", process.capabilities()
        plan = probes.make_plan(snap, prof, caps, tests=tests)
        cap = LinkCapability(snap)
        outcomes = [probes.ProbeOutcome(test=w.test, subjects=w.subjects, status=probes.Status.WAIVED,
                                        reason=w.reason) for w in plan.waived]
        for w in plan.waived:
            on_item(Item(w.test, w.subjects, "waived", w.reason))
        gpu_ids = {g.id for g in snap.gpus}
        indices = {g.id: g.index for g in snap.gpus}
        for item in plan.items:
            if stop.is_set():
                break
            touched = [s for s in (*item.subjects, *(t.id for t in item.background)) if s in gpu_ids]
            answer = busy() if touched else {}
            why = {g: r for g in touched if (r := busy_of(answer, g, indices.get(g)))}
            if why:
                reason = "; ".join(f"GPU {g} is busy ({r})" for g, r in sorted(why.items()))
                outcomes.append(probes.ProbeOutcome(test=item.test, subjects=item.subjects,
                                                    status=probes.Status.WAIVED, reason=reason))
                unknown = any(is_unknown(r) for r in why.values())
                on_item(Item(item.test, item.subjects, BUSY_UNKNOWN if unknown else BUSY, reason))
                continue
            budgeted = item if item_timeout_s is None else dataclasses.replace(
                item, wall_budget_s=min(item.wall_budget_s, item_timeout_s))
            raw = process.run(budgeted)
            outcome = assemble(spec(chosen, item.test), budgeted, raw, taken_at=time.time(), cap=cap)
            outcomes.append(outcome)
            on_item(Item(item.test, item.subjects, outcome.status.value, outcome.reason))
    order = {s.name: n for n, s in enumerate(specs_for(chosen))}
    outcomes.sort(key=lambda o: order.get(o.test, len(order)))
    return probes.ProbeReport(profile=prof.name, backend=chosen, outcomes=tuple(outcomes), versions=caps.versions,
                              elapsed_s=time.monotonic() - t0)


def kill_children() -> int:
    """SIGKILL every descendant of this process, a group leader with its process group (a probe child leads
    its own session, so its gloo ranks and perftest go with it). Returns how many were signalled."""
    import psutil  # only at shutdown: 0.8 MiB (measured) resident in every agent otherwise

    killed = 0
    for child in (c.pid for c in psutil.Process().children(recursive=True)):
        try:
            if os.getpgid(child) == child:
                os.killpg(child, signal.SIGKILL)
            else:
                os.kill(child, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:
            continue
    return killed


def next_probe_at(started: float, ended: float, interval_s: float, duty_cycle: float) -> float:
    """When the next scheduled pass may start: after the interval, and late enough that probe time stays
    within ``duty_cycle`` of wall time."""
    return max(ended + interval_s, started + (ended - started) / duty_cycle)
