"""Placement search and fleet report against their targets, and the cost model against published numbers:
prints tables. Not a test.

    .venv/bin/python benchmarks/placement.py [--runs 20] [--nodes 10000]

Search: the median over ``--runs`` of ``best_groups`` from a snapshot (the cost model's fabric built each
time, as a request would), for the best 8 on 8-GPU machine profiles (target 10 ms) and the best 16 among
the 72 GPUs of a GB200 NVL72-like NVLink domain (target 100 ms; C(72, 16) is about 10^15 groups). Fleet:
``fleet_report`` over ``--nodes`` simulated node summaries (NVL72 racks, HGX H100 nodes, PCIe nodes; bus
bandwidths from the cost model on those machines, jittered 5%, 1% of nodes degraded), with where 16 GPUs
fit: target 2 s and 500 MB (the process's peak resident memory, imports included). Cluster: ``topolink
cluster --gpus 16`` as a user runs it (a process of its own: interpreter, imports, kubeconfig) against
``--nodes`` simulated nodes listed by an HTTP server in this process (benchmarks/_fake_fleet.py: labels and
slices from topolink's own sinks, with what a kube-apiserver adds), in pages of 500: wall time and the
command's peak resident memory, same targets; the command with nothing to read (its start-up floor); then
the same read in this process, split into its parts: getting the pages, the read again from those bytes in
memory, and a bare parse of them (msgspec skipping every field: the floor of any decode).

    .venv/bin/python benchmarks/placement.py --only cluster --runs 3
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _fake_fleet import Encoded, serve, simulated  # noqa: E402  (beside this script)
from _table import print_rows  # noqa: E402

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
PARTS = ("search", "served", "estimates", "fleet", "cluster")
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


def served(runs: int, work: Path) -> None:
    """GET /v1/placement and / through the agent's ASGI app: the first answer per snapshot searches, the next
    ones come from the cache."""
    from starlette.testclient import TestClient

    from exporter import HttpConfig, MetricsCache, View, create_app

    rows = []
    generations = itertools.count(1)
    for name, snap in (("hgx-h100", discover_profile("hgx-h100", work / "served")), ("NVL72 domain", nvl72())):

        def fresh(s: t.Snapshot = snap) -> TestClient:
            view = View(snapshot=s, generation=next(generations))
            return TestClient(create_app(lambda: view, MetricsCache(lambda: view), HttpConfig()))

        for path, label in (("/v1/placement?gpus=8", "GET /v1/placement?gpus=8"), ("/", "GET / (page)")):
            first = _median_ms(lambda p=path: fresh().get(p), runs)
            client = fresh()
            client.get(path)
            again = _median_ms(lambda p=path, c=client: c.get(p), runs)
            size = len(client.get(path).content)
            rows.append((f"{label}, {name}, {len(snap.gpus)} GPUs", f"{first:.1f} ms",
                         f"cached: {again:.1f} ms; {size / 1e3:.0f} kB"))
    print("\nServed (through the ASGI app in process; first request of a snapshot, then cached)")
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


# Runs the command as a child of a small process of its own and reports the child's wall time and peak
# resident memory. Not from this process: Linux counts the memory a child shared with its parent before exec
# in the child's peak, and this process holds the simulated fleet.
_LAUNCHER = """
import json, os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump({"seconds": time.perf_counter() - start, "maxrss_kib": usage.ru_maxrss,
               "status": os.waitstatus_to_exitcode(status)}, f)
"""


def _run_measured(argv: list[str], env: dict[str, str], report: Path) -> tuple[float, float, int, bytes]:
    """Wall seconds, peak resident MB, exit status and standard output of ``argv``."""
    out = subprocess.run([sys.executable, "-c", _LAUNCHER, str(report), *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env, check=False).stdout
    got = json.loads(report.read_text())
    return got["seconds"], got["maxrss_kib"] * 1024 / 1e6, got["status"], out


class _Recorded:
    """A list API that hands on ``api``'s answers, keeping them and the time spent getting the pages; or, with
    ``replay`` (another's), answers with what that one kept, in order: the same read from memory."""

    def __init__(self, api: Any, replay: _Recorded | None = None) -> None:
        self.api, self.seconds = api, 0.0
        self.bodies: list[bytes] = []
        self.versions: Sequence[str] = replay.versions if replay else ()
        self._replay = iter(replay.bodies if replay else [])

    def served_versions(self, group: str) -> Sequence[str]:
        if self.api is not None:
            self.versions = self.api.served_versions(group)
        return self.versions

    def get_page(self, path: str, params: Mapping[str, str], accept: str | None = None) -> bytes:
        if self.api is None:
            return next(self._replay)
        start = time.perf_counter()
        body: bytes = self.api.get_page(path, params, accept)
        self.seconds += time.perf_counter() - start
        self.bodies.append(body)
        return body


def _kubeconfig(url: str, path: Path) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "f",
                                "clusters": [{"name": "f", "cluster": {"server": url}}],
                                "users": [{"name": "u", "user": {}}],
                                "contexts": [{"name": "f", "context": {"cluster": "f", "user": "u"}}]}))
    return path


def cluster(nodes: int, work: Path) -> None:
    import msgspec

    from exporter.kube import LightkubeApi, read_cluster

    kinds = {"gb200": discover_profile("gb200-tray", work / "c-gb200"),
             "hgx": discover_profile("hgx-h100", work / "c-h"), "pcie": discover_profile("rtx4090-8x", work / "c-pcie")}
    fleet = simulated(kinds, nodes, random.Random(5))
    url, stop = serve(fleet)
    empty_url, stop_empty = serve(Encoded(nodes=[], slices=[], node_bytes=0, slice_bytes=0))
    config, empty = _kubeconfig(url, work / "kubeconfig"), _kubeconfig(empty_url, work / "empty-kubeconfig")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))}

    def argv(kubeconfig: Path) -> list[str]:
        return [sys.executable, "-m", "agent.cli", "cluster", "--kubeconfig", str(kubeconfig), "--gpus", "16",
                "--format", "json"]
    try:
        _run_measured(argv(config), env, work / "run.json")  # warm: the page cache for the interpreter, modules
        runs = [_run_measured(argv(config), env, work / "run.json") for _ in range(3)]
        floor = statistics.median(_run_measured(argv(empty), env, work / "run.json")[0] for _ in range(3))
        recorded = _Recorded(LightkubeApi.connect(kubeconfig=str(config)))
        start = time.perf_counter()
        read = read_cluster(recorded)
        read_s = time.perf_counter() - start
        start = time.perf_counter()
        report = t.fleet_report(read.summaries, gpus=16)
        report_s = time.perf_counter() - start
    finally:
        stop()
        stop_empty()
    start = time.perf_counter()
    read_cluster(_Recorded(None, recorded))
    memory_s = time.perf_counter() - start
    bare = msgspec.json.Decoder(msgspec.defstruct("Nothing", []))
    start = time.perf_counter()
    for body in recorded.bodies:
        bare.decode(body)
    parse_s = time.perf_counter() - start
    wall = statistics.median(r[0] for r in runs)
    rss = max(r[1] for r in runs)
    doc = json.loads(runs[0][3]) if runs[0][2] == 0 else {}
    best = report.fits[0] if report.fits else None
    rows = [
        (f"topolink cluster --gpus 16, {nodes} nodes ({fleet.node_bytes / 1e6:.0f} MB of node metadata, "
         f"{fleet.slice_bytes / 1e6:.0f} MB of slices)", f"{wall:.2f} s",
         ("ok" if wall <= 2 else "OVER") + f" (target 2 s; median of 3, exit {runs[0][2]})"),
        ("peak resident memory of that process", f"{rss:.0f} MB",
         ("ok" if rss <= 500 else "OVER") + " (target 500 MB)"),
        ("  the command with nothing to read (interpreter, imports, kubeconfig, two empty lists)", f"{floor:.2f} s",
         "median of 3"),
        ("  the same read in this process, beside the server's thread", f"{read_s:.2f} s",
         f"{read.pages} pages, {len(read.summaries)} nodes, {read.slices} slices"),
        ("    of it, getting the pages (HTTP, the server's work included)", f"{recorded.seconds:.2f} s", "-"),
        ("    the same read from those bytes in memory (decode, fold, summaries)", f"{memory_s:.2f} s", "-"),
        ("    a bare parse of those bytes (msgspec, every field skipped)", f"{parse_s:.2f} s", "-"),
        ("  the fleet report", f"{report_s * MS:.0f} ms",
         f"{len(report.classes)} classes, {sum(len(c.outliers) for c in report.classes)} outliers"),
        ("where 16 GPUs fit best", best.kind if best else "nowhere",
         f"{(best.busbw_bytes_per_second or 0) / 1e9:.0f} GB/s, {best.limit}, {best.source}" if best else "-"),
        ("the command's answer agrees", "yes" if doc.get("nodes") == len(read.summaries) else "NO", "-"),
    ]
    print("\nCluster (topolink cluster against a simulated API server; busbw classes are estimates)")
    print_rows(rows, value_width=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--only", choices=PARTS, action="append", help="run only this part (repeatable)")
    args = parser.parse_args(argv)
    only = set(args.only or PARTS)
    with tempfile.TemporaryDirectory(prefix="topolink-placement-") as tmp:
        work = Path(tmp)
        if "search" in only:
            search(args.runs, work)
        if "served" in only:  # a quarter of the runs, at least 3, at most --runs
            served(min(args.runs, max(3, args.runs // 4)), work)
        if "estimates" in only:
            estimates(work)
        if "fleet" in only:
            fleet(args.nodes, work)
        if "cluster" in only:
            cluster(args.nodes, work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
