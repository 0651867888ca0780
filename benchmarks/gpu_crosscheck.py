"""The cuda backend against independent tools on a GPU host: prints tables of ratios. Not a test.

    python benchmarks/gpu_crosscheck.py [--rounds 2] [--mib 512]

Needs a GPU, CuPy and PyTorch (CUDA build); prints why and exits 2 without them.
- ``topolink topo`` against ``nvidia-smi topo -m`` (its ANSI underline removed): identical or the diff.
- per GPU, host to device, device to host (NUMA node of the GPU's CPUs) and the device-local copy from the
  cuda backend at the full profile (``--mib`` buffers, 4 warm-up + 16 timed copies, median of 3), next to
  PyTorch copying the same sizes with the same counts between CUDA events (pinned host memory), the two
  interleaved round by round (ours, PyTorch, ours, ...): target each ratio within 0.95..1.05.
Peer copies are not compared: which end issues a "write" copy differs between tools, and one GPU cannot
show which way a comparison would be wrong.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _table import print_rows  # noqa: E402  (beside this script)

import probes  # noqa: E402
import topology as t  # noqa: E402
from probes.core import MiB  # noqa: E402

TESTS = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_local_copy")


def discover_here() -> t.Snapshot:
    from agent.discovery import discover
    from agent.discovery.access import DiscoveryContext

    return discover(DiscoveryContext())


def topo_table() -> list[tuple[str, str, str]]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [("topo vs nvidia-smi topo -m", "nvidia-smi not found", "")]
    theirs = re.sub(r"\x1b\[[0-9;]*m", "", subprocess.run([smi, "topo", "-m"], capture_output=True, text=True,
                                                             check=False).stdout)
    ours = subprocess.run([sys.executable, "-m", "agent.cli", "topo"], capture_output=True, text=True, cwd=REPO,
                          check=False).stdout
    if ours == theirs:
        return [("topo vs nvidia-smi topo -m", "identical", "PASS")]
    diff = "".join(difflib.unified_diff(theirs.splitlines(True), ours.splitlines(True), "nvidia-smi", "topolink"))
    print(diff)
    return [("topo vs nvidia-smi topo -m", "differs (diff above)", "FAIL")]


def ours_gbps(snap: t.Snapshot, mib: int) -> dict[tuple[str, tuple[str, ...]], float]:
    profile = dataclasses.replace(probes.FULL, name="crosscheck", copy_bytes=mib * MiB)
    report = probes.run_probes(snap, profile_name=profile, backend="cuda", tests=list(TESTS), force=True)
    out = {}
    for o in report.outcomes:
        for m in o.measurements:
            if m.source is t.Source.MEASURED and m.unit == "bytes_per_second":
                out[m.test, m.subjects] = m.value / 1e9
    return out


def torch_gbps(snap: t.Snapshot, mib: int) -> dict[tuple[str, tuple[str, ...]], float]:
    import torch

    size, warm, timed = mib * MiB, 4, 16
    index = {g.id: g.index for g in snap.gpus}

    def rate(dst: torch.Tensor, src: torch.Tensor, device: int) -> float:
        def once() -> float:
            with torch.cuda.device(device):
                stream = torch.cuda.Stream()
                with torch.cuda.stream(stream):
                    for _ in range(warm):
                        dst.copy_(src, non_blocking=True)
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record(stream)
                    for _ in range(timed):
                        dst.copy_(src, non_blocking=True)
                    b.record(stream)
                b.synchronize()
                return size * timed / (a.elapsed_time(b) / 1e3) / 1e9
        return statistics.median(once() for _ in range(3))

    out = {}
    for gid, i in index.items():
        node = next((n for n in snap.numa_nodes if n.os_index == (snap_gpu_numa(snap, gid) or 0)), None)
        if node is not None and node.cpus:
            os.sched_setaffinity(0, node.cpus)  # pinned pages first touched on the GPU's node, as ours are
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        dev = torch.empty(size, dtype=torch.uint8, device=f"cuda:{i}")
        other = torch.empty(size, dtype=torch.uint8, device=f"cuda:{i}")
        numa = node.id if node is not None else "numa0"
        out["host_to_device_memcpy_ce", (numa, gid)] = rate(dev, host, i)
        out["device_to_host_memcpy_ce", (numa, gid)] = rate(host, dev, i)
        out["device_local_copy", (gid,)] = rate(other, dev, i)
        del host, dev, other
    return out


def snap_gpu_numa(snap: t.Snapshot, gid: str) -> int | None:
    gpu = next(g for g in snap.gpus if g.id == gid)
    return gpu.numa_node if gpu.numa_node is not None else (gpu.memory_affinity[0] if gpu.memory_affinity else None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mib", type=int, default=512)
    args = parser.parse_args()
    missing = [m for m in ("cupy", "torch") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"gpu_crosscheck: needs {', '.join(missing)}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("gpu_crosscheck: no CUDA device", file=sys.stderr)
        return 2
    snap = discover_here()
    rows = topo_table()
    ours: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    theirs: dict[tuple[str, tuple[str, ...]], list[float]] = {}
    for _ in range(args.rounds):  # interleaved: ours, PyTorch, ours, PyTorch ...
        for key, v in ours_gbps(snap, args.mib).items():
            ours.setdefault(key, []).append(v)
        for key, v in torch_gbps(snap, args.mib).items():
            theirs.setdefault(key, []).append(v)
    for key in sorted(set(ours) & set(theirs)):
        a, b = statistics.median(ours[key]), statistics.median(theirs[key])
        ratio = a / b
        rows.append((f"{key[0]} {','.join(key[1])}", f"{a:.2f} / {b:.2f} GB/s = {ratio:.3f}",
                     "PASS" if 0.95 <= ratio <= 1.05 else "FAIL (0.95..1.05)"))
    for key in sorted(set(ours) ^ set(theirs)):
        rows.append((f"{key[0]} {','.join(key[1])}", "only " + ("topolink" if key in ours else "PyTorch"), ""))
    name = torch.cuda.get_device_name(0)
    print(f"topolink vs PyTorch, {len(snap.gpus)} x {name}, {args.mib} MiB, {args.rounds} interleaved rounds "
          "(topolink / PyTorch)")
    print_rows(rows, 32)
    return 0


if __name__ == "__main__":
    sys.exit(main())
