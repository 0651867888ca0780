"""Placement search and fleet report against their targets, and the cost model against published numbers:
prints tables. Not a test.

    .venv/bin/python benchmarks/placement.py [--runs 20] [--nodes 10000]

Search: the median over ``--runs`` of ``best_groups`` from a snapshot (the cost model's fabric built each
time, as a request would), for the best 8 on 8-GPU machine profiles (target 10 ms) and the best 16 among
the 72 GPUs of a GB200 NVL72-like NVLink domain (target 100 ms; C(72, 16) is about 10^15 groups). Fleet:
``fleet_report`` over ``--nodes`` simulated node summaries (NVL72 racks, HGX H100 nodes, PCIe nodes; bus
bandwidths from the cost model on those machines, jittered 5%, 1% of nodes degraded), with where 16 GPUs
fit: target 2 s and 500 MB (the process's peak resident memory, imports included).
"""

from __future__ import annotations

import argparse
import math
import random
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _table import print_rows  # noqa: E402  (beside this script)

import topology as t  # noqa: E402
from tests.placement_support import (  # noqa: E402
    B200,
    TWO_LEVEL_SWITCHES_16,
    discover_profile,
    nvl72,
    pcie_box,
    published,
)

MS = 1e3
SEARCH_PROFILES = ("hgx-h100", "dgx-a100", "rtx4090-8x", "a6000-8x-nvlink-pairs", "dgx1-v100")


def _median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm: imports, caches of the interpreter
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * MS


def search(runs: int, work: Path) -> None:
    rows = []
    for profile in SEARCH_PROFILES:
        snap = discover_profile(profile, work / profile)
        for n in (8, 4):
            ms = _median_ms(lambda s=snap, k=n: t.best_groups(s, k), runs)
            best = t.best_groups(snap, n)
            target = 10.0 if n == 8 else None
            verdict = ("ok" if ms <= target else "OVER") + f" (target {target:g} ms)" if target else "-"
            rows.append((f"best {n} of 8, {profile} ({best.evaluated} groups)", f"{ms:.2f} ms", verdict))
    domain = nvl72()
    for n in (16, 8, 72):
        ms = _median_ms(lambda k=n: t.best_groups(domain, k), runs)
        best = t.best_groups(domain, n)
        target = 100.0 if n == 16 else None
        verdict = ("ok" if ms <= target else "OVER") + f" (target {target:g} ms)" if target else "-"
        optimal = "proven best" if best.optimal else "best found"
        rows.append((f"best {n} of 72, NVL72 domain ({best.evaluated} of {math.comb(72, n):.1e} groups, {optimal})",
                     f"{ms:.2f} ms", verdict))
    box = discover_profile("rtx4090-8x", work / "pcie16", TWO_LEVEL_SWITCHES_16)
    for n in (4, 12):
        ms = _median_ms(lambda k=n: t.best_groups(box, k), runs)
        best = t.best_groups(box, n)
        rows.append((f"best {n} of 16, PCIe 2-level switches ({best.evaluated} groups)", f"{ms:.2f} ms",
                     "proven best" if best.optimal else "best found"))
    print("Placement search (median of runs, cost model built from the snapshot each time)")
    print_rows(rows, value_width=10)


def estimates(work: Path) -> None:
    rows = []
    snaps: dict[str, t.Snapshot] = {}
    for row in published():
        if row.profile not in snaps:
            snaps[row.profile] = (nvl72() if row.profile == "nvl72" else
                                  discover_profile("hgx-h100", work / "b200", B200) if row.profile == "hgx-b200" else
                                  discover_profile(row.profile, work / f"pub-{row.profile}"))
        snap = snaps[row.profile]
        est = t.collective_estimate(snap, [g.id for g in snap.gpus], 8 << 30, nvls=row.algorithm == "nvls")
        bw = (est.busbw_bytes_per_second or 0.0) / 1e9
        mid = (row.low + row.high) / 2e9
        rows.append((f"{row.system}, {row.gpus} GPUs, {est.algorithm.value}", f"{bw:.0f} GB/s",
                     f"published {row.low / 1e9:.0f}-{row.high / 1e9:.0f} GB/s, estimate/published {bw / mid:.2f}"))
    print("\nAll-reduce bus bandwidth at 8 GiB: estimate (source: estimate) vs published (nccl-tests)")
    print_rows(rows, value_width=10)


def _node_figures(work: Path) -> dict[str, tuple[tuple[int, float], ...]]:
    """Each simulated node kind's best-group bus bandwidths, from the cost model on that machine."""
    machines = {"NVIDIA GB200": nvl72(trays=1), "NVIDIA H100 80GB HBM3": discover_profile("hgx-h100", work / "h"),
                "NVIDIA L40S": pcie_box([["gpu"] * 4, ["gpu"] * 4])}
    out = {}
    for product, snap in machines.items():
        sizes = [n for n in (2, 4, 8) if n <= len(snap.gpus)]
        out[product] = tuple((n, t.best_groups(snap, n, top=1).groups[0].estimate.busbw_bytes_per_second or 0.0)
                             for n in sizes)
    return out


def simulated_fleet(nodes: int, figures: dict[str, tuple[tuple[int, float], ...]],
                    rng: random.Random) -> list[t.NodeSummary]:
    fleet = []
    for i in range(nodes):
        kind = rng.random()
        if kind < 0.6:
            product, gpus, clique = "NVIDIA GB200", 4, f"rack-{i // 18:04d}.1"
            nvlink, nic = 900e9, 4 * 50e9
        elif kind < 0.9:
            product, gpus, clique, nvlink, nic = "NVIDIA H100 80GB HBM3", 8, None, 450e9, 8 * 50e9
        else:
            product, gpus, clique, nvlink, nic = "NVIDIA L40S", 8, None, None, 2 * 25e9
        degraded = 0.5 if rng.random() < 0.01 else 1.0
        busbw = tuple((n, v * degraded * rng.uniform(0.95, 1.05)) for n, v in figures[product])
        fleet.append(t.NodeSummary(node=f"node-{i:05d}", product=product, gpus=gpus, clique=clique, busbw=busbw,
                                   busbw_source="simulated", nvlink_bytes_per_second=nvlink, nic_bytes_per_second=nic))
    return fleet


def fleet(nodes: int, work: Path) -> None:
    figures = _node_figures(work)
    summaries = simulated_fleet(nodes, figures, random.Random(21))
    start = time.perf_counter()
    report = t.fleet_report(summaries, gpus=16)
    seconds = time.perf_counter() - start
    tracemalloc.start()
    t.fleet_report(summaries, gpus=16)
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # KiB on Linux
    outliers = sum(len(c.outliers) for c in report.classes)
    best = report.fits[0] if report.fits else None
    rows = [
        (f"fleet_report, {nodes} nodes, {len(report.classes)} classes", f"{seconds * MS:.0f} ms",
         ("ok" if seconds <= 2 else "OVER") + " (target 2 s)"),
        ("peak resident memory of this process", f"{rss:.0f} MB",
         ("ok" if rss <= 500 else "OVER") + " (target 500 MB)"),
        ("memory allocated by the report (tracemalloc peak)", f"{peak:.1f} MB", "-"),
        ("outliers (simulated: 1% of nodes at half their figure)", str(outliers), "-"),
        ("where 16 GPUs fit best", best.kind if best else "nowhere",
         f"{(best.busbw_bytes_per_second or 0) / 1e9:.0f} GB/s, {best.limit}, {best.source}" if best else "-"),
    ]
    print("\nFleet report (simulated node summaries, busbw from the cost model jittered 5%)")
    print_rows(rows, value_width=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=10_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="topolink-placement-") as tmp:
        work = Path(tmp)
        search(args.runs, work)
        estimates(work)
        fleet(args.nodes, work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
