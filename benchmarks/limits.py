"""Bounded work: each command on a saved snapshot from 8 GPUs up to each of the snapshot limits, and one
past it. Prints a table. Not a test.

    .venv/bin/python benchmarks/limits.py [--steps N]

The snapshots are synthetic (benchmarks/_big.py: HGX-like boards of 8 GPUs repeated, NICs, PCI functions
and links added until one limit is reached; every other list stays small). Each command runs as a user
runs it, a process of its own (interpreter, imports, reading the file): its CPU time (user and system,
from the child's rusage: what it costs whatever else runs on a shared machine), wall time, and peak
resident memory (``ru_maxrss``). At each limit the target is 2 s of CPU and 300 MB.

- ``topo --from``: the GPU/NIC matrix (a cell per pair: its work grows with the square of GPUs + NICs,
  which is what the GPU and NIC limits bound);
- ``place --from --gpus 8``: the placement search;
- ``dot``: ``topology.to_dot`` of the snapshot read back, what ``discover --format dot`` renders once
  discovery is done (the discovery of a sysfs tree this size is not built here);
- ``page``: the node page ``serve`` answers on ``/`` (``exporter.page``) with its picture's DOT text;
- ``metrics``: the first ``/metrics`` the agent answers for the snapshot (OpenMetrics, gzip: what Prometheus
  asks for) with serve's default ``--metrics-pair-series-limit``, the scrape's own CPU beside the process's, and
  its series; the target for the scrape is 1 s of CPU (a scrape's default timeout is 10 s). Its series grow with
  GPU pairs (G(G-1)/2, two families), GPU x RDMA NIC pairs (G x N, four families) and NUMA node pairs (U^2); NIC
  pairs are never needed. The pair families are built and rendered once per snapshot (``topology.per_snapshot``),
  whichever view asks; this first scrape pays for them. Above the limit (256 GPUs) none is published;
- ``pairs``: the same with every pair family published whatever its series (the limit off): what the switch
  costs, no target.

- ``discover`` at 8 GPUs and 1,024 NICs: the first discovery pass (``discover --format json -o``, a process of its
  own) on a sysfs tree and test NVML grown from the ``hgx-h100`` profile (tests/fakenvml) with RDMA NICs under
  PCIe switches in host bridges of their own until the NIC limit; target 3 s of CPU.

Past a limit (the last row of each), ``topo --from`` must refuse the snapshot with exit 3 before reading
its entries.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _table import print_rows  # noqa: E402

import topology as t  # noqa: E402

TARGET_S, TARGET_MB = 2.0, 300.0
_DOT = "import sys, topology; from agent.cli._common import load_snapshot; topology.to_dot(load_snapshot(sys.argv[1]))"
_PAGE = ("import sys, topology, exporter; from agent.cli._common import load_snapshot\n"
         "snap = load_snapshot(sys.argv[1]); exporter.picture_dot(snap)\n"
         "view = exporter.View(snapshot=snap, structure_hash=topology.structure_hash(snap))\n"
         "exporter.page(view, now=0.0, svg=None, svg_reason='linked', measured_matrix='')")
_METRICS = ("import sys, time, topology, exporter; from agent.cli._common import load_snapshot\n"
            "from exporter._metrics._exposition import MetricsCache\n"
            "snap = load_snapshot(sys.argv[-1]); limit = int(sys.argv[1]) if len(sys.argv) > 2 else 50_000\n"
            "view = exporter.View(snapshot=snap, structure_hash=topology.structure_hash(snap))\n"
            "t = time.process_time()\n"
            "body = MetricsCache(lambda: view, pair_limit=limit).body(openmetrics=True, gzipped=True)\n"
            "print(f'scrape_cpu={time.process_time() - t}')\n"
            "import gzip; print(f'series={sum(not x.startswith(b\"#\") for x in gzip.decompress(body).splitlines())}')")
SCRAPE_TARGET_S = 1.0
COMMANDS = {
    "topo": ["-m", "agent.cli", "topo", "--from"],
    "place": ["-m", "agent.cli", "place", "--gpus", "8", "--from"],
    "dot": ["-c", _DOT],
    "page": ["-c", _PAGE],
    "metrics": ["-c", _METRICS],
    "pairs": ["-c", _METRICS, str(1 << 40)],  # every pair family, whatever its series: the cost of the switch on
}
NO_TARGET = ("pairs",)  # its cost is documented, the default (metrics) is held to the targets
LIMITS = t.SNAPSHOT_LIMITS


def _ladders() -> dict[str, list[dict[str, int]]]:
    """Each limit, and the sizes on the way to it, as asked of ``_big.big``."""
    return {
        "gpus": [{"gpus": n} for n in (8, 32, 128, LIMITS["gpus"])],
        "nics": [{"gpus": 8, "nics": n} for n in (8, 128, LIMITS["nics"])],
        "pci": [{"gpus": 8, "pci": n} for n in (1024, 8192, LIMITS["pci"])],
        "links": [{"gpus": 8, "links": n} for n in (1024, 8192, LIMITS["links"])],
    }


def _run(args: list[str], path: Path) -> tuple[float, float, float, int, str]:
    """Wall seconds, CPU seconds, peak resident MB, exit status and standard output of one command in a
    process of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, *args, str(path)], cwd=REPO, env=env, stdout=out,
                                stderr=subprocess.PIPE)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr is not None else ""
        _, status, usage = os.wait4(proc.pid, 0)
        out.seek(0)
        printed = out.read().decode(errors="replace")
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.stderr is not None:
        proc.stderr.close()
    if "Traceback" in err:
        raise SystemExit(f"limits: {' '.join(args[:4])} {path.name} failed:\n{err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode, printed


_WRITE = ("import sys; sys.path.insert(0, 'benchmarks'); import topology as t; from _big import big\n"
          "s = big(*map(int, sys.argv[2:3]), nics=int(sys.argv[3]), pci=int(sys.argv[4]), links=int(sys.argv[5]))\n"
          "open(sys.argv[1], 'w').write(t.dumps(s, indent=None))\n"
          "print(f'{len(s.gpus)} GPUs, {len(s.nics)} NICs, {len(s.pci)} PCI, {len(s.links)} links')")


def _write(path: Path, size: dict[str, int]) -> str:
    """Writes the snapshot in a process of its own (so that this one stays small: a child's peak resident
    memory counts its parent's at the fork), and returns its sizes in words."""
    args = [str(size.get(k, d)) for k, d in (("gpus", 8), ("nics", 0), ("pci", 0), ("links", 0))]
    return subprocess.run([sys.executable, "-c", _WRITE, str(path), *args], cwd=REPO, check=True,
                          capture_output=True, text=True).stdout.strip()


DISCOVERY_TARGET_S = 3.0


def _discovery_at_nic_limit(tmp: Path) -> tuple[str, str, str]:
    """The first discovery pass on the test NVML's hgx-h100 with RDMA NICs added up to the NIC limit: 30 under
    each PCIe switch (at most 32 ports), six switches a host bridge, each host bridge in a PCI domain of its own
    (a domain has 256 buses)."""
    import yaml

    from tests.fakenvml import materialize, profile_path

    doc = yaml.safe_load(profile_path("hgx-h100").read_text())
    count = sum(1 for line in profile_path("hgx-h100").read_text().splitlines() if "nic: {name:" in line)
    domain = 0x10
    while count < LIMITS["nics"]:
        switches = []
        for _ in range(6):
            names = [f"mlx5_{n}" for n in range(count, min(count + 30, LIMITS["nics"]))]
            switches += [{"switch": [{"nic": {"name": name}} for name in names]}] if names else []
            count += len(names)
        doc["pci"].append({"host_bridge": f"{domain:04x}:00", "numa": domain % 2, "gen": 5, "children": switches})
        domain += 1
    (tmp / "nics.yaml").write_text(yaml.safe_dump(doc))
    node = materialize(tmp / "nics.yaml", tmp / "nics")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | node.env()
    start = time.perf_counter()
    command = [sys.executable, "-m", "agent.cli", "discover", "--format", "json", "-o", str(tmp / "n.json")]
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall, cpu = time.perf_counter() - start, usage.ru_utime + usage.ru_stime
    snap = json.loads((tmp / "n.json").read_text())
    ok = cpu <= DISCOVERY_TARGET_S and os.waitstatus_to_exitcode(status) in (0, 1) and len(snap["nics"]) == count
    return (f"discover {len(snap['gpus'])} GPUs, {len(snap['nics'])} NICs, {len(snap['pci'])} PCI (a sysfs tree)",
            f"{cpu:.2f} s CPU, {wall:.2f} s wall, {usage.ru_maxrss / 1024:.0f} MB measured",
            f"{'ok' if ok else 'OVER'} (limit nics: {DISCOVERY_TARGET_S:g} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=0, help="only the first N sizes of each ladder (0: all)")
    ap.add_argument("--only", choices=(*_ladders(), "discover"), help="one limit's ladder (or the discovery) only")
    args = ap.parse_args()
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "discover"):
            rows.append(_discovery_at_nic_limit(Path(tmp)))
        for limit, ladder in _ladders().items():
            if args.only and limit != args.only:
                continue
            steps = ladder[:args.steps] if args.steps else ladder
            for size in steps:
                path = Path(tmp) / "snap.json"
                sizes = _write(path, size)
                at_limit = size is ladder[-1]
                for name, command in COMMANDS.items():
                    wall, cpu, mb, rc, printed = _run(command, path)
                    said = dict(line.split("=", 1) for line in printed.splitlines() if "=" in line)
                    scrape = float(said.get("scrape_cpu", 0)) if "scrape_cpu" in said else None
                    series = said.get("series", "?")
                    if at_limit and name not in NO_TARGET:
                        ok = cpu <= TARGET_S and mb <= TARGET_MB and rc in (0, 1)
                        ok = ok and (scrape is None or scrape <= SCRAPE_TARGET_S)
                        target = f"{TARGET_S:g} s" + (f", the scrape {SCRAPE_TARGET_S:g} s" if scrape else "")
                        verdict = f"{'ok' if ok else 'OVER'} (limit {limit}: {target}, {TARGET_MB:g} MB)"
                    else:
                        verdict = "-" if rc in (0, 1) else f"exit {rc}"
                    measured = f"{cpu:.2f} s CPU, {wall:.2f} s wall, {mb:.0f} MB measured"
                    if scrape is not None:
                        measured = f"{series} series, scrape {scrape:.2f} s CPU; {measured}"
                    rows.append((f"{name:<7} {sizes} ({path.stat().st_size >> 10} KiB)", measured, verdict))
            path = Path(tmp) / "over.json"
            over: dict[str, object] = {"schema": t.SCHEMA, "node": "over", limit: [{}] * (LIMITS[limit] + 1)}
            path.write_text(json.dumps(over))
            wall, cpu, mb, rc, _ = _run(COMMANDS["topo"], path)
            rows.append((f"topo    {LIMITS[limit] + 1} {limit}: one past the limit",
                         f"{cpu:.2f} s CPU, {wall:.2f} s wall, {mb:.0f} MB measured",
                         "ok (refused, exit 3)" if rc == 3 else f"WRONG: exit {rc}, want 3"))
    print_rows(rows, value_width=36)


if __name__ == "__main__":
    main()
