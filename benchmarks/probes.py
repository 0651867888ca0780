"""The probe against an independent tool, its repeatability and its overhead: prints a table. Not a test.

    .venv/bin/python benchmarks/probes.py [--mib 256] [--runs 5]
    .venv/bin/python benchmarks/probes.py --memory [--gpus 1 8]

``--memory`` prints instead the memory and time budget per profile: the peak memory of the probe child and
everything it starts (``_memory.PeakMemory``: the proportional set size summed over its session, sampled
every 20 ms) and the wall time of a whole pass, for the cpu backend's quick and full profiles on this
machine and for the cuda backend's quick profile on 1 and 8 simulated GPUs (the fake CUDA runtime of the
tests, whose device memory, held in host RAM, is left out: what remains is the probe's own host memory,
its pinned host buffers included; a real CUDA context adds its own, which only a GPU can show). Targets:
the quick profile under 512 MB at 8 GPUs, the cpu full profile under 1 GB, both inside the agent
container's memory limit (daemonset/base/daemonset.yaml) with room for the agent itself.

Rows:
- host copy bandwidth of the cpu backend (``host_memcpy``, node 0 -> node 0, nvbandwidth's full-profile
  repetitions: 4 warm-up + 16 timed copies, median of 3) next to Debian ``mbw``'s memcpy test on the same
  buffer size (``apt-get install mbw``; MiB/s converted to decimal GB/s), the two interleaved run by run
  (ours, mbw, ours, mbw, ...) so that load from others falls on both: target the medians within 10%.
  mbw 1.2.2 swaps two labels: its worker runs ``memcpy`` for ``-t1`` (printed "DUMB") and the element
  loop ``b[i]=a[i]`` for ``-t0`` (printed "MEMCPY") -- see ``worker()`` and ``printout()`` in mbw.c. The
  comparison uses the run that calls memcpy; the "MEMCPY"-labelled one is printed beside it.
- repeatability: the coefficient of variation of the medians of ``--runs`` whole probe runs: target <= 5%;
- the quick profile of the cpu backend end to end, as ``topolink probe`` runs it (one child process for
  the pass, its gloo ranks forked after importing torch once, planning, per-sample verification): total
  wall time (target <= 3 s) and its parts: starting the child and asking the backend what it can do,
  each item in the child, what is left (planning, the pipe, assembling), and the share spent outside
  the timed copies and collectives. The collective's item is split in two: its own work, from running it
  once more in the same child after the pass (torch imported, the ranks kept; not in the total), and the
  rest, importing torch and starting the ranks. ``import torch`` alone in a fresh interpreter is printed
  beside it: the first collective item pays it once.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _memory import PeakMemory  # noqa: E402  (beside this script)
from _table import print_rows  # noqa: E402  (beside this script)

import probes  # noqa: E402
import topology as t  # noqa: E402
from probes.core import MiB, spec  # noqa: E402
from probes.harness import _plan  # noqa: E402
from topology import replace  # noqa: E402


def this_machine() -> t.Snapshot:
    from agent.discovery import discover
    from agent.discovery.access import DiscoveryContext

    return discover(DiscoveryContext())


def copy_gbps(snap: t.Snapshot, mib: int) -> float:
    profile = dataclasses.replace(probes.FULL, name="bench", copy_bytes=mib * MiB, host_copy_bytes=mib * MiB)
    report = probes.run_probes(snap, profile_name=profile, backend="cpu", tests=["host_memcpy"])
    node0 = next(o for o in report.outcomes if o.subjects[0] == o.subjects[1])
    if node0.status is not probes.Status.OK:
        raise SystemExit(f"host_memcpy did not run: {node0.reason}")
    return node0.measurements[0].value / 1e9


def mbw_gbps(mib: int, test: int) -> float | None:
    """mbw's average over 10 runs of one test (``-t<test>``), in decimal GB/s."""
    exe = shutil.which("mbw")
    if exe is None:
        return None
    cmd = [exe, "-q", "-n", "10", f"-t{test}", str(mib)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    match = re.search(r"^AVG\s+Method: \w+.*Copy:\s*([0-9.]+) MiB/s", out, re.MULTILINE)
    return float(match.group(1)) * 1024 * 1024 / 1e9 if match else None


def timed_seconds(report: probes.ProbeReport) -> float:
    """Seconds inside the timed windows: each sample's bytes x operations / its rate (every mode of a sweep)."""
    total = 0.0
    for o in report.outcomes:
        if o.status is not probes.Status.OK:
            continue
        s = spec(report.backend, o.test)
        rows = [m for m in o.sweep if m.direction == "algbw"] or [m for m in o.measurements if m.direction != "a<->b"]
        iters = probes.QUICK.collective_iters if o.sweep else probes.QUICK.copy_iters
        for m in rows:
            assert m.stats is not None and m.size_bytes is not None
            moved = s.moved(m.size_bytes, len(o.subjects))
            total += sum(moved * iters / v for v in m.stats.samples)
    return total


def quick_pass(snap: t.Snapshot) -> tuple[float, float, probes.ProbeReport, float | None]:
    """(total, child start + capabilities, report, the collective again) of one quick pass of the cpu backend.
    After the pass, before the child is closed (its close is counted in the total), its collective runs once
    more in the same child, outside the total: torch is imported and the ranks are kept by then, so this is
    the item's own work, and the first run less this is what importing torch and starting the ranks took."""
    t0 = time.perf_counter()
    with probes.ProbeProcess("cpu") as process:
        process.capabilities()
        started = time.perf_counter() - t0
        report = probes.run_probes(snap, profile_name="quick", process=process)
        passed = time.perf_counter() - t0
        again = probes.run_probes(snap, profile_name="quick", process=process, tests=["all_reduce"])
        closing = time.perf_counter()
    total = passed + time.perf_counter() - closing
    ok = [o.elapsed_s for o in again.outcomes if o.status is probes.Status.OK]
    return total, started, report, ok[0] if ok else None


def torch_import_seconds() -> float | None:
    try:
        done = subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); import torch.distributed;"
                               " print(time.perf_counter() - t)"], capture_output=True, text=True, check=True)
    except subprocess.CalledProcessError:
        return None
    return float(done.stdout.split()[-1])


FAKE = REPO / "tests" / "fakecuda"
QUICK_LIMIT, FULL_CPU_LIMIT = 512e6, 1e9


def budget(snap: t.Snapshot, profile: str, backend: str, gpus: int = 0) -> tuple[float, float, str]:
    """(peak bytes, seconds, outcome summary) of one pass; ``gpus`` simulated GPUs for the cuda backend,
    whose repetitions are cut to one sample of two operations (an item's memory does not depend on them,
    and the fake moves 256 MiB over eight GPUs in numpy, far slower than the budgets allow)."""
    env = dict(os.environ)
    chosen: str | probes.Profile = profile
    if backend == "cuda":
        chosen = dataclasses.replace(probes.profile(profile), samples=1, copy_iters=2, collective_iters=2,
                                     latency_accesses=2000)
        os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (str(FAKE), env.get("PYTHONPATH", "")) if p),
                          FAKECUDA_GPUS=str(gpus), FAKECUDA_MEMORY=str(4 << 30))
        snap = replace(snap, gpus=tuple(
            t.Gpu(id=f"0000:{0x10 + i:02x}:00.0", index=i, numa_node=snap.numa_nodes[0].os_index if snap.numa_nodes
                  else None, memory_bytes=80 << 30) for i in range(gpus)), links=())
    floor = _plan._GPU_FLOOR_BYTES_PER_SECOND
    _plan._GPU_FLOOR_BYTES_PER_SECOND = 0.01e9  # the wall-time budgets widened for the fake's pace
    try:
        t0 = time.perf_counter()
        with probes.ProbeProcess(backend) as process, \
                PeakMemory(lambda: process.pid, without_shmem=backend == "cuda") as peak:
            report = probes.run_probes(snap, profile_name=chosen, process=process)
        seconds = time.perf_counter() - t0
    finally:
        os.environ.clear()
        os.environ.update(env)
        _plan._GPU_FLOOR_BYTES_PER_SECOND = floor
    states = [o.status.value for o in report.outcomes]
    return peak.peak, seconds, ", ".join(f"{states.count(s)} {s}" for s in dict.fromkeys(states))


def memory_rows(snap: t.Snapshot, gpus: list[int]) -> list[tuple[str, str, str]]:
    rows = []
    runs = [("quick", "cpu", 0, QUICK_LIMIT), ("full", "cpu", 0, FULL_CPU_LIMIT)]
    runs += [("quick", "cuda", n, QUICK_LIMIT) for n in gpus]
    for profile, backend, n, limit in runs:
        peak, seconds, states = budget(snap, profile, backend, n)
        what = f"{backend} {profile}" + (f", {n} simulated GPU{'s' if n > 1 else ''}" if n else "")
        verdict = "PASS" if peak <= limit else f"FAIL (target < {limit / 1e6:.0f} MB)"
        rows.append((f"{what}: peak memory (MB)", f"{peak / 1e6:.0f}", f"{verdict}; {states}"))
        rows.append((f"{what}: wall time (s)", f"{seconds:.1f}",
                     "the fake's time, repetitions cut: not a GPU's" if n else "this machine, shared and loaded"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256, help="copy buffer size in MiB (default 256)")
    parser.add_argument("--runs", type=int, default=5, help="whole probe runs for repeatability (default 5)")
    parser.add_argument("--memory", action="store_true", help="the memory and time budget per profile instead")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 8], help="simulated GPU counts (--memory)")
    args = parser.parse_args()
    snap = this_machine()
    if args.memory:
        print(f"topolink probe memory and time budget: {len(snap.numa_nodes)} NUMA node(s), {os.cpu_count()} CPUs; "
              "peak = PSS of the probe child's session, sampled every 20 ms")
        print_rows(memory_rows(snap, args.gpus))
        return 0

    ours: list[float] = []
    mbw: list[float] = []
    for _ in range(args.runs):  # interleaved: A B A B ...
        ours.append(copy_gbps(snap, args.mib))
        one = mbw_gbps(args.mib, 1)  # memcpy (labelled DUMB by mbw 1.2.2)
        if one is not None:
            mbw.append(one)
    theirs = statistics.median(mbw) if mbw else None
    loop = mbw_gbps(args.mib, 0)  # the element loop (labelled MEMCPY)
    total, started, quick, again = quick_pass(snap)
    inside = timed_seconds(quick)
    items = sum(o.elapsed_s for o in quick.outcomes)
    torch_s = torch_import_seconds()

    mine = statistics.median(ours)
    rows = [(f"host_memcpy, median of {len(ours)} runs (GB/s)", f"{mine:.2f}", ""),
            (f"mbw -t1 memcpy, median of {len(mbw)} interleaved runs (GB/s)",
             f"{theirs:.2f}" if theirs else "mbw not installed", "each run the avg of 10 copies"),
            ("mbw -t0 ('MEMCPY' label, b[i]=a[i] loop)", f"{loop:.2f}" if loop else "-", "for reference only")]
    if theirs:
        gap = abs(mine - theirs) / theirs
        rows.append(("|probe - mbw| / mbw", f"{gap:.1%}", "PASS" if gap <= 0.10 else "FAIL (target <= 10%)"))
        rows.append(("  mbw runs (GB/s)", " ".join(f"{x:.2f}" for x in mbw), ""))
    cv = statistics.stdev(ours) / statistics.fmean(ours) if len(ours) > 1 else 0.0
    rows.append((f"medians of {len(ours)} runs (GB/s)", " ".join(f"{x:.2f}" for x in ours), ""))
    rows.append(("repeatability CV over runs", f"{cv:.1%}", "PASS" if cv <= 0.05 else "FAIL (target <= 5%)"))
    rows.append(("quick profile total (s)", f"{total:.2f}", ("PASS" if total <= 3.0 else "FAIL (target <= 3 s)")
                 + "; " + ", ".join(f"{o.test}:{o.status.value}" for o in quick.outcomes)))
    rows.append(("  child start + capabilities (s)", f"{started:.2f}", "one child for the whole pass"))
    for o in quick.outcomes:
        note = "imports torch, forks the ranks" if o.test == "all_reduce" else ""
        rows.append((f"  {o.test}[{','.join(o.subjects)}] in the child (s)", f"{o.elapsed_s:.2f}", note))
        if o.test == "all_reduce" and again is not None:
            rows.append(("    of which the collective's own work (s)", f"{again:.2f}",
                         "run again in the same child, ranks kept: sizes, samples, checks"))
            rows.append(("    of which importing torch, starting the ranks (s)", f"{o.elapsed_s - again:.2f}",
                         "the first run less the second"))
    rows.append(("  planning, pipe, assembly (s)", f"{total - started - items:.2f}", ""))
    rows.append(("  inside timed windows (s)", f"{inside:.2f}", ""))
    rows.append(("  share outside the timed work", f"{1 - inside / total:.0%}",
                 "process start, torch import, allocation, placement check, verification"))
    rows.append(("import torch.distributed alone (s)", f"{torch_s:.2f}" if torch_s else "-",
                 "a fresh interpreter, for reference"))

    print(f"topolink probe benchmark: {args.mib} MiB buffers, cpu backend, "
          f"{len(snap.numa_nodes)} NUMA node(s), {len(probes.specs_for('cpu'))} cpu tests")
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
