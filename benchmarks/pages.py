"""The node page of every test machine (tests/machines): its picture drawn by Graphviz as ``serve`` draws it
on first load (``exporter.picture_dot`` then ``exporter.render_svg``, ``dot -Tsvg``), timed, beside the
picture's size (nodes and edges). The target is 2 s of wall time per page on first load. Prints a table.
Not a test.

    .venv/bin/python benchmarks/pages.py [--runs N] [--machines NAME ...] [--limits]

Each machine is written out as tests/fakenvml does (its sysfs tree and the test NVML) and discovered as the
agent discovers it; the time is the median of ``--runs`` renders (wall time: Graphviz runs in a child, and
a shared machine's load adds to it: say the load with the figures).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _table import print_rows  # noqa: E402

TARGET_S = 2.0


def _snapshots(names: list[str], limits: bool) -> Iterator[tuple[str, Any]]:
    """Each test machine as discovered; with ``limits``, the synthetic snapshots at the GPU and NIC limits
    (benchmarks/_big.py, as limits.py makes them)."""
    import topology
    from tests.serve_machines import discover_profile

    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            yield name, discover_profile(name, Path(tmp))[0]
    if limits:
        from _big import big

        cap = topology.SNAPSHOT_LIMITS
        yield f"synthetic, {cap['gpus']} GPUs", big(cap["gpus"])
        yield f"synthetic, {cap['nics']} NICs", big(8, nics=cap["nics"])


def page_rows(names: list[str], runs: int, limits: bool = False) -> list[tuple[str, str, str]]:
    import exporter

    rows = []
    for name, snap in _snapshots(names, limits):
        dot = exporter.picture_dot(snap)
        times, reason = [], ""
        for _ in range(runs):
            start = time.perf_counter()
            svg = exporter.render_svg(dot, timeout_s=60)
            times.append(time.perf_counter() - start)
            reason = svg.reason
        edges = sum(" -- " in line for line in dot.splitlines())
        nodes = sum(line.strip().endswith("];") and " -- " not in line and not line.strip().startswith(
            ("graph", "node", "edge")) for line in dot.splitlines())
        took = statistics.median(times)
        verdict = ("ok" if took <= TARGET_S else f"over {TARGET_S:g} s") if not reason else f"no picture: {reason}"
        rows.append((f"{name}: {len(snap.numa_nodes)} NUMA nodes, {nodes} nodes, {edges} edges",
                     f"{took:.2f} s measured", verdict))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--machines", nargs="+", default=None, help="default: every machine in tests/machines")
    parser.add_argument("--limits", action="store_true", help="also the synthetic snapshots at the GPU and NIC limits")
    args = parser.parse_args()
    names = args.machines or sorted(p.stem for p in (REPO / "tests" / "machines").glob("*.yaml"))
    print(f"page picture on first load, median of {args.runs} (target {TARGET_S:g} s)")
    print_rows(page_rows(names, args.runs, args.limits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
