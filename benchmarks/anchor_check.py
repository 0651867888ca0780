"""The tests changed in probes round 4 against the anchors built on a GPU host: prints tables of ratios from
one run of each side. Not a test.

    python benchmarks/anchor_check.py --nvbandwidth PATH --nccl-tests DIR [--max-size 8G] [--small-mib 16]

Needs a GPU, CuPy, nvbandwidth (``--nvbandwidth``: its binary) and nccl-tests (``--nccl-tests``: the
``build`` directory with ``all_reduce_perf``); prints why and exits 2 without them. Both are run with
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, as the snapshot numbers GPUs.

- SM copies below 64 MiB (nvbandwidth's simple kernel) at ``--small-mib``, and the peer copies by copy
  engine (issued on the issuing GPU's context) at 512 MiB: topolink's cell over nvbandwidth's cell
  (``nvbandwidth -t TEST -b MiB -j``), every cell of both matrices; target 0.95..1.05. A CE read or write
  far from its nvbandwidth figure while the other matches is the sign of a copy run by the other GPU's
  engine.
- The NCCL collectives over every GPU, in both modes: topolink's busbw per size and place over
  ``<op>_perf -b 1M -e MAX -f 2 -g N -n 20 -w 1 -G 0`` and ``-G 1`` (``topolink probe
  --collective-timing stream`` / ``graph``), and the two ``Avg bus bandwidth`` figures; target 0.97..1.03
  from 32 MiB up; below, the stream mode pays Python's issue time per operation and its ratio says how much.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import probes  # noqa: E402
import topology as t  # noqa: E402
from probes.core import MiB, nccl_tests_command  # noqa: E402

SMALL_SM = ("host_to_device_memcpy_sm", "device_to_host_memcpy_sm", "device_to_device_memcpy_read_sm",
            "device_to_device_memcpy_write_sm")
PEER_CE = ("device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+\w+\s+\S+\s+-?\d+\s+(.*)$")


def print_rows(title: str, head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    print(title)
    for row in (head, *rows):
        cells = enumerate(zip(row, widths, strict=True))
        print("  ".join(f"{c:<{w}}" if i < 3 else f"{c:>{w}}" for i, (c, w) in cells))
    print()


def parse_size(text: str) -> int:
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def nvbandwidth_cells(binary: str, test: str, mib: int) -> dict[tuple[int, int], float]:
    """(row, column) -> GB/s of one nvbandwidth test (its JSON output)."""
    out = subprocess.run([binary, "-t", test, "-b", str(mib), "-j"], capture_output=True, text=True, check=False)
    cases = json.loads(out.stdout)["nvbandwidth"]["testcases"]
    matrix = next((c.get("bandwidth_matrix", []) for c in cases if c.get("name") == test), [])
    return {(r, c): float(v) for r, row in enumerate(matrix) for c, v in enumerate(row) if v != "N/A"}


def nccl_tests_cells(binary: Path, gpus: int, max_size: int,
                     graphs: int) -> tuple[dict[tuple[int, str], float], float]:
    """((size, place) -> busbw GB/s, Avg bus bandwidth) of one nccl-tests run."""
    argv = nccl_tests_command(binary.name.removesuffix("_perf"), _sweep(max_size), gpus, iters=20, warmup=1,
                              timing="graph" if graphs else "stream", launches=max(graphs, 1)).split()[1:]
    out = subprocess.run([str(binary), *argv], capture_output=True, text=True, check=False).stdout
    cells: dict[tuple[int, str], float] = {}
    for line in out.splitlines():
        m = _ROW.match(line)
        if m:
            f = m.group(3).split()  # time algbw busbw #wrong, out of place then in place
            cells[int(m.group(1)), "out of place"] = float(f[2])
            cells[int(m.group(1)), "in place"] = float(f[6])
    avg = re.search(r"Avg bus bandwidth\s*:\s*([\d.]+)", out)
    return cells, float(avg.group(1)) if avg else float("nan")


def _sweep(max_size: int) -> tuple[int, ...]:
    sizes, s = [], 1 << 20
    while s <= max_size:
        sizes.append(s)
        s *= 2
    return tuple(sizes)


def _ordinal(snap: t.Snapshot, subject: str) -> int:
    gpu = next((g for g in snap.gpus if g.id == subject), None)
    return gpu.index if gpu is not None and gpu.index is not None else 0  # a host row is row 0


def _local(snap: t.Snapshot, subjects: tuple[str, ...]) -> bool:
    """A host copy from the GPU's own NUMA node (the one nvbandwidth's CPU affinity picks); any GPU pair."""
    host = subjects[0]
    if not host.startswith("numa"):
        return True
    gpu = next((g for g in snap.gpus if g.id == subjects[-1]), None)
    return gpu is not None and gpu.numa_node is not None and f"numa{gpu.numa_node}" == host


def copies(snap: t.Snapshot, binary: str, tests: tuple[str, ...], mib: int) -> list[tuple[str, ...]]:
    profile = dataclasses.replace(probes.FULL, copy_bytes=mib * MiB)
    report = probes.run_probes(snap, profile_name=profile, backend="cuda", tests=list(tests))
    rows = []
    for test in tests:
        theirs = nvbandwidth_cells(binary, test, mib)
        for m in (m for o in report.outcomes if o.test == test for m in o.measurements):
            if not _local(snap, m.subjects):
                continue  # nvbandwidth copies with the GPU's own NUMA node only
            at = (_ordinal(snap, m.subjects[0]), _ordinal(snap, m.subjects[1])) if len(m.subjects) > 1 else (
                0, _ordinal(snap, m.subjects[0]))
            other = theirs.get(at)
            rows.append((test, f"{mib} MiB", "->".join(map(str, at)), f"{m.value / 1e9:.2f}",
                         f"{other:.2f}" if other else "N/A", f"{m.value / 1e9 / other:.3f}" if other else "N/A"))
    return rows


def collectives(snap: t.Snapshot, build: Path, max_size: int) -> list[tuple[str, ...]]:
    profile = dataclasses.replace(probes.FULL, collective_sizes=_sweep(max_size))
    rows = []
    for timing, graphs in (("stream", 0), ("graph", 1)):
        report = probes.run_probes(snap, profile_name=profile, backend="cuda", tests=list(COLLECTIVES),
                                   collective_timing=timing)
        for op in COLLECTIVES:
            done = [o for o in report.outcomes if o.test == op and o.measurements]
            if not done:
                continue
            whole = max(done, key=lambda o: len(o.subjects))
            theirs, avg = nccl_tests_cells(build / f"{op}_perf", len(whole.subjects), max_size, graphs)
            for m in (m for m in whole.sweep if m.direction == "busbw"):
                place = dict(m.conditions)["mode"]
                other = theirs.get((m.size_bytes or 0, place))
                rows.append((op, f"-G {graphs}", f"{m.size_bytes} {place}", f"{m.value / 1e9:.2f}",
                             f"{other:.2f}" if other else "N/A", f"{m.value / 1e9 / other:.3f}" if other else "N/A"))
            ours = next(m for m in whole.measurements if m.direction == "avg_busbw")
            rows.append((op, f"-G {graphs}", "Avg bus bandwidth", f"{ours.value / 1e9:.2f}", f"{avg:.2f}",
                         f"{ours.value / 1e9 / avg:.3f}"))
    return rows


def missing(args: argparse.Namespace) -> str | None:
    if importlib.util.find_spec("cupy") is None:
        return "needs cupy (pip install 'topolink[cuda]')"
    if not args.nvbandwidth or not os.access(args.nvbandwidth, os.X_OK):
        return "needs nvbandwidth (--nvbandwidth PATH to its binary)"
    if not args.nccl_tests or not (Path(args.nccl_tests) / "all_reduce_perf").exists():
        return "needs nccl-tests (--nccl-tests DIR holding all_reduce_perf)"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--nvbandwidth", default="", help="the nvbandwidth binary built here")
    ap.add_argument("--nccl-tests", default="", help="nccl-tests' build directory (all_reduce_perf, ...)")
    ap.add_argument("--max-size", default="8G", help="the collectives' largest size (nccl-tests -e), e.g. 8G")
    ap.add_argument("--small-mib", type=int, default=16, help="the SM copies' size below 64 MiB")
    args = ap.parse_args()
    why = missing(args)
    if why:
        print(f"anchor_check: {why}", file=sys.stderr)
        return 2
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA ordinals in the snapshot's order, for every tool
    from agent.discovery import discover
    from agent.discovery.access import DiscoveryContext

    snap = discover(DiscoveryContext())
    if not snap.gpus:
        print("anchor_check: no CUDA device", file=sys.stderr)
        return 2
    head = ("test", "size / mode", "cell", "topolink GB/s", "anchor GB/s", "ratio")
    print_rows("Copies against nvbandwidth (one run each)",
               head, copies(snap, args.nvbandwidth, SMALL_SM, args.small_mib)
               + copies(snap, args.nvbandwidth, PEER_CE, 512))
    if len(snap.gpus) > 1:
        print_rows("Collectives against nccl-tests, busbw (one run each)", head,
                   collectives(snap, Path(args.nccl_tests), parse_size(args.max_size)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
