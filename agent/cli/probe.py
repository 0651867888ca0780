"""``topolink probe`` and ``topolink selftest``: the command-line face of the ``probes`` package.

Exit status of ``probe``: 0 at least one test produced a number; 4 none could (every test waived or
failed: no GPU, no library, busy GPUs, budgets overrun); 2 usage (unknown test, a tree from another machine,
a --from snapshot of another machine); 3 unreadable --from file.
Exit status of ``selftest``: 0 no test failed and at least one passed; 1 a test failed; 4 none could run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from ._common import fixture_reason

if TYPE_CHECKING:  # loaded by the handlers: building the parser (--help) needs neither
    from collections.abc import Sequence

    import probes
    import topology

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NONE_RAN = 0, 1, 2, 4
_PROBE_EPILOG = ("Exit status: 0 at least one test produced a number; 4 none could run (each is listed with "
                 "its reason); 2 usage (also: a --sysfs-root that is a gathered tree, not this kernel's sysfs and "
                 "procfs mounted there, or an --nvml-library given as a file path, a test NVML; or "
                 "a --from snapshot that does not describe this machine: its node name, NUMA nodes and CPUs or "
                 "GPUs differ from what discovery sees here, whose devices this machine's numbers must not be "
                 "put on); 3 unreadable or incoherent --from file or unwritable -o (checked before any "
                 "measuring).")
_SELFTEST_EPILOG = "Exit status: 0 no test failed and one passed; 1 a test failed; 4 none could run here."


def add_parsers(sub: Any, add_discovery_args: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``probe`` and ``selftest`` to the ``topolink`` subcommands."""
    from exporter._core._settings import TEXT

    p = sub.add_parser("probe", help="measure bandwidth and latency (copies, all-reduce, GPUDirect RDMA)",
                       description="Run the probes of a profile in budgeted child processes and print the "
                                   "measured matrices beside the theoretical rates.", epilog=_PROBE_EPILOG)
    p.add_argument("--tests", type=TEXT, metavar="NAME", nargs="+", help="only these tests (see --list)")
    p.add_argument("--list", action="store_true",
                   help="list the tests of each backend (marked quick: run by the quick profile) and exit")
    p.add_argument("--profile", choices=("quick", "full"), default="quick",
                   help="quick: a bounded selection of tests (see --list), small, for periodic runs; full: every "
                        "test at nvbandwidth's defaults (512 MiB, 4 warm-up + 16 timed copies, median of 3) and "
                        "collective sweeps to 8 GiB as nccl-tests -G 1 times them (see --collective-timing)")
    p.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto",
                   help="auto: cuda when there are GPUs and CuPy is installed, else cpu")
    p.add_argument("--collective-timing", choices=("graph", "stream"), default=None,
                   help="how the NCCL collectives are timed: graph, as nccl-tests -G 1 (every profile's own); "
                        "stream, as nccl-tests -G 0 (its default; the calls come from Python, which reads low "
                        "at small sizes)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="json: the report (topolink.probe/v2) with the snapshot it measured")
    p.add_argument("-o", "--output", type=TEXT, metavar="FILE", help="write to FILE instead of standard output")
    p.add_argument("--force", action="store_true", help="also probe GPUs that run compute processes or are busy")
    p.add_argument("--from", type=TEXT, dest="from_file", metavar="SNAPSHOT.json",
                   help="probe against a saved snapshot")
    add_discovery_args(p)
    p.set_defaults(handler=_cmd_probe)

    s = sub.add_parser("selftest", help="run every probe at tiny sizes and say pass/fail per test",
                       epilog=_SELFTEST_EPILOG)
    s.add_argument("--gpu", action="store_true", help="the CUDA tests (default: the cpu backend's)")
    add_discovery_args(s)
    s.set_defaults(handler=_cmd_selftest)


class ProgressBar:
    """Progress on standard error (never standard output, which may carry the JSON report): a one-line bar
    on a terminal; one line per test started otherwise (a log, a pipe, ``kubectl logs``)."""

    def __init__(self, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream, self.width = stream or sys.stderr, width
        self.active = self.stream.isatty()
        self.drawn = False

    def __call__(self, done: int, total: int, key: str) -> None:
        if total == 0:
            return
        if not self.active:
            if key:
                self.stream.write(f"topolink probe: [{done + 1}/{total}] {key}\n")
                self.stream.flush()
            return
        filled = self.width * done // total
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r[{bar}] {done}/{total} {key[:60]:<60}")
        self.stream.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _snapshot(args: argparse.Namespace) -> topology.Snapshot:
    from ._common import discover_from_args, load_snapshot

    return load_snapshot(args.from_file) if getattr(args, "from_file", None) else discover_from_args(args)


def _cmd_probe(args: argparse.Namespace) -> int:
    from ._output import check_output

    check_output(args.output)
    if args.list:
        import probes

        quick = set(probes.QUICK.tests or ())
        for backend in probes.BACKENDS:
            for spec in probes.specs_for(backend):
                print(f"{backend:<5} {spec.name:<48} {'quick' if spec.name in quick else '':<5} {spec.description}")
        return EXIT_OK
    if (why := fixture_reason(args)) is not None:
        print(f"topolink probe: refusing to measure: {why}", file=sys.stderr)
        return EXIT_USAGE
    snap = _snapshot(args)
    if args.from_file and (why := _refuse_foreign(args, snap)) is not None:
        print(f"topolink probe: {why}", file=sys.stderr)
        return EXIT_USAGE
    if args.backend == "cuda" and not snap.gpus:
        import topology

        why = (topology.no_gpu_reason(snap) or "No NVIDIA GPU found").rstrip(".")
        print(f"topolink probe: --backend cuda: no test could run: {why}; --backend cpu measures host memory",
              file=sys.stderr)
        return EXIT_NONE_RAN
    return run_probe(args, snap)


def _refuse_foreign(args: argparse.Namespace, snap: topology.Snapshot) -> str | None:
    """``--from SNAPSHOT``: the numbers are measured on this machine and filed under the snapshot's devices,
    so the snapshot must describe this machine, as a fresh discovery of it sees it now: the same node name,
    the same NUMA nodes with the same CPUs, the same GPUs under the same NVML index (and UUID, where both
    know it). Anything else would file this host's numbers under another's GPUs and NUMA nodes."""
    from ._common import discover_from_args

    here = discover_from_args(args)
    why = machine_differences(snap, here)
    if not why:
        return None
    return (f"refusing to measure: {args.from_file} does not describe this machine ({'; '.join(why[:3])}). "
            "Probe without --from, or with a snapshot this machine's discovery wrote.")


def machine_differences(saved: topology.Snapshot, here: topology.Snapshot) -> list[str]:
    """How ``saved`` differs from ``here`` in what probes measure: node, NUMA nodes and CPUs, GPUs."""
    out = []
    if saved.node != here.node:
        out.append(f"node {saved.node!r}, this is {here.node!r}")
    numa = {n.os_index: n.cpus for n in saved.numa_nodes}
    numa_here = {n.os_index: n.cpus for n in here.numa_nodes}
    if numa != numa_here:
        out.append(f"NUMA nodes {_numa_text(numa)}, here {_numa_text(numa_here)}")
    gpus = {g.id: g for g in saved.gpus}
    gpus_here = {g.id: g for g in here.gpus}
    if set(gpus) != set(gpus_here):
        out.append(f"GPUs {sorted(gpus) or 'none'}, here {sorted(gpus_here) or 'none'}")
    for bus in sorted(set(gpus) & set(gpus_here)):
        a, b = gpus[bus], gpus_here[bus]
        if a.index != b.index or (a.uuid and b.uuid and a.uuid != b.uuid):
            out.append(f"GPU {bus!r} is index {a.index} ({a.uuid!r}), here index {b.index} ({b.uuid!r})")
    return out


def _numa_text(nodes: dict[int, tuple[int, ...]]) -> str:
    from topology import format_cpulist

    return ", ".join(f"{i}: {format_cpulist(c) or '-'}" for i, c in sorted(nodes.items())) or "none"


def _cmd_selftest(args: argparse.Namespace) -> int:
    if (why := fixture_reason(args)) is not None:
        print(f"topolink selftest: refusing to measure: {why}", file=sys.stderr)
        return EXIT_USAGE
    snap = _snapshot(args)
    return run_selftest(args, snap)


def run_probe(args: argparse.Namespace, snapshot: topology.Snapshot) -> int:
    import probes

    from ._output import write_output

    bar = ProgressBar()
    try:
        report = probes.run_probes(snapshot, profile_name=args.profile, backend=args.backend, tests=args.tests,
                                   force=args.force, progress=bar, collective_timing=args.collective_timing)
    except probes.ProbeError as exc:
        print(f"topolink probe: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        bar.finish()
    if args.format == "json":
        text = probes.report_json(report, snapshot) + "\n"
    else:
        text = probes.render_report(report, snapshot) + "\n"
    write_output(text, args.output)
    if not report.ran:
        print("topolink probe: no test could run (each is listed with its reason)", file=sys.stderr)
        return EXIT_NONE_RAN
    return EXIT_OK


def run_selftest(args: argparse.Namespace, snapshot: topology.Snapshot | None = None) -> int:
    import probes

    bar = ProgressBar()
    try:
        lines, report = probes.selftest(snapshot, gpu=args.gpu, progress=bar)
    finally:
        bar.finish()
    print(f"topolink selftest: {report.backend} backend, {report.elapsed_s:.1f} s")
    for note in report.notes:
        print(f"note: {note}")
    for verdict, test, detail in selftest_rows(lines):
        print(f"{verdict:<4} {test:<48} {detail}")
    if any(line.verdict == "FAIL" for line in lines):
        return EXIT_FAILED
    if not any(line.verdict == "PASS" for line in lines):
        return EXIT_NONE_RAN
    return EXIT_OK


def selftest_rows(lines: Sequence[probes.SelftestLine]) -> list[tuple[str, str, str]]:
    """One row per test that passed or failed, and one per reason for the tests skipped: 40 tests skipped
    because CuPy is missing are one row, "40 tests", with that reason (``probe --list`` names them)."""
    skipped: dict[str, list[str]] = {}
    rows: list[tuple[str, str, str]] = []
    for line in lines:
        if line.verdict != "SKIP":
            rows.append((line.verdict, line.test, line.detail))
            continue
        if line.detail not in skipped:
            skipped[line.detail] = []
            rows.append(("SKIP", line.detail, line.detail))  # its place: where the reason first came
        skipped[line.detail].append(line.test)
    return [(v, t, d) if v != "SKIP" else (v, _tests(skipped[d], len(lines)), d) for v, t, d in rows]


def _tests(names: list[str], total: int) -> str:
    if len(names) == 1:
        return names[0]
    return f"all {total} tests" if len(names) == total else f"{len(names)} tests"
