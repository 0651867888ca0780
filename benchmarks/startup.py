"""Start-up and discovery overhead against lstopo and nvidia-smi, paired and interleaved: prints tables of ratios.
Not a test.

    .venv/bin/python benchmarks/startup.py [--runs N] [--trees NAME,...]

Every whole-process row alternates the two commands it compares (A B A B ...), so load from others on the
machine falls on both; medians and the ratio of medians are printed, with peak RSS (ru_maxrss of the child).
- The start-up budget, topolink installed from its wheel into a temporary virtual environment with bytecode
  compiled (benchmarks/_wheel.py): ``discover --format json -o FILE`` at most 3.5x ``python -I -c pass``;
  ``topolink --help`` at most 1.5x ``python -I -c pass``; ``topo`` at most 1x ``nvidia-smi topo -m`` (both pay
  NVML's start; run only where nvidia-smi exists). ``discover --help`` against ``python -I -c pass`` and
  ``discover`` against ``lstopo-no-graphics --of xml FILE`` are shown as information, and so is argparse's
  floor (``python -I -c "import argparse; argparse.ArgumentParser().parse_args([])"``, and the same parser
  printing its help, ``parse_args(['--help'])``), which ``--help`` cannot go below. Where valgrind is
  installed, the same commands in instructions executed (one run each: the count does not move with others'
  load, as time on a shared machine does). Beside it, where ``discover``'s time goes
  in that environment, phase by phase.
- ``topolink discover --format json`` against ``lstopo-no-graphics --of xml`` on the live machine and on every
  hwloc tree in tests/data/hwloc/linux (lstopo reads a tree with ``--input DIR``), run from the repository
  with its bytecode absent and compiled: target <= 4x.
- whether ``discover`` imported pynvml where no NVML library loads.
- the discovery call in-process on the 137-function tree (target <= 8 ms) and the hgx-h100 profile
  (<= 15 ms), and on synthetic NVSwitch machines of 16, 32 and 64 GPUs grown from it: cost per GPU, NVML
  calls and pair calls (P2P status, common ancestor); time may grow no faster than the pair calls.
- ``topology.dumps`` indented and compact at 8 and 64 GPUs, against indenting with ``json.dumps``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._wheel import Installed, install_wheel  # noqa: E402
from tests.reference_data import hwloc_tarballs, unpack_hwloc_tree  # noqa: E402

if TYPE_CHECKING:
    from topology import Snapshot

VENV_PY = str(REPO / ".venv/bin/python") if (REPO / ".venv/bin/python").exists() else sys.executable
TOPOLINK = [VENV_PY, "-m", "agent.cli"]
_PACKAGES = ("agent", "topology", "probes", "exporter")


def hwloc_trees(dest: Path, only: Sequence[str] = ()) -> list[tuple[str, Path]]:
    """The gathered hwloc trees of the test data (``only``: those named; default every one), unpacked below
    ``dest``: (name, root)."""
    names = [t.name.removesuffix(".tar.bz2") for t in hwloc_tarballs()]
    unknown = sorted(set(only) - set(names))
    if unknown:
        raise SystemExit(f"startup: no hwloc tree {', '.join(unknown)} in tests/data/hwloc/linux ({', '.join(names)})")
    trees = []
    for tarball in hwloc_tarballs():
        name = tarball.name.removesuffix(".tar.bz2")
        if only and name not in only:
            continue
        (dest / name).mkdir()
        trees.append((name, unpack_hwloc_tree(tarball, dest / name)))
    return trees


def pci_count(root: Path) -> int:
    return len(list((root / "sys/bus/pci/devices").glob("*")))


def _run(cmd: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, int, float]:
    """Wall milliseconds, peak RSS (KiB) and CPU milliseconds (user and system) of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keeps Popen from reaping it again
    return (time.perf_counter() - t0) * 1e3, usage.ru_maxrss, (usage.ru_utime + usage.ru_stime) * 1e3


def peak_rss_kib(cmd: Sequence[str]) -> int:
    """Peak RSS of one run, from GNU time: a child's own ru_maxrss would include the forked interpreter."""
    out = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, cwd=REPO, check=False).stderr.strip().splitlines()
    return int(out[-1]) if out and out[-1].isdigit() else 0


def paired(a: Sequence[str], b: Sequence[str], runs: int, env: dict[str, str] | None = None
           ) -> tuple[float, float, int, int]:
    """Medians (ms) of a and b run alternately, and their peak RSS (KiB)."""
    ta, tb, _, _ = paired_cpu(a, b, runs, env)
    return statistics.median(ta), statistics.median(tb), peak_rss_kib(a), peak_rss_kib(b)


def paired_cpu(a: Sequence[str], b: Sequence[str], runs: int, env: dict[str, str] | None = None
               ) -> tuple[list[float], list[float], list[float], list[float]]:
    """Wall and CPU milliseconds of a and b run alternately: (wall a, wall b, CPU a, CPU b)."""
    _run(a, env), _run(b, env)  # warm the page cache
    ta, tb, ca, cb = [], [], [], []
    for _ in range(runs):
        wall, _, cpu = _run(a, env)
        ta.append(wall)
        ca.append(cpu)
        wall, _, cpu = _run(b, env)
        tb.append(wall)
        cb.append(cpu)
    return ta, tb, ca, cb


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    print(f"\n{title}\n| " + " | ".join(header) + " |\n|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


@contextlib.contextmanager
def bytecode(label: str) -> Iterator[None]:
    """The repository's bytecode ``absent`` (as in a fresh clone with PYTHONDONTWRITEBYTECODE=1) or
    ``compiled`` (``compileall`` into its ``__pycache__``, as an installed package has it); the
    ``__pycache__`` directories made here are removed again afterwards."""
    before = _compiled_dirs()
    try:
        if label == "compiled":
            subprocess.run([VENV_PY, "-m", "compileall", "-q", *(str(REPO / p) for p in _PACKAGES)],
                           check=True, stdout=subprocess.DEVNULL)
        yield
    finally:
        for d in _compiled_dirs() - before:
            shutil.rmtree(d, ignore_errors=True)


def vs_lstopo(runs: int, trees: list[tuple[str, Path]]) -> None:
    lstopo = shutil.which("lstopo-no-graphics")
    if lstopo is None:
        print("\nlstopo-no-graphics not installed (apt-get install hwloc): no lstopo rows")
        return
    rows = []
    inputs: list[tuple[str, list[str], list[str]]] = [("this machine", [], [])]
    inputs += [(name, ["--sysfs-root", str(root)], ["--input", str(root)]) for name, root in trees]
    for label in ("absent", "compiled"):
        with bytecode(label):
            for name, ours_args, theirs_args in inputs:
                ours, theirs, rss_ours, rss_theirs = paired([*TOPOLINK, "discover", "--format", "json", *ours_args],
                                                            [lstopo, "--of", "xml", *theirs_args], runs)
                ratio = ours / theirs
                rows.append((name, label, f"{ours:.0f}", f"{theirs:.0f}", f"{ratio:.1f}x",
                             "ok" if ratio <= 4 else "OVER", f"{rss_ours / 1024:.0f}", f"{rss_theirs / 1024:.0f}"))
    table(f"discover --format json vs lstopo-no-graphics --of xml (median of {runs} paired runs; target <= 4x)",
          ("input", "repository bytecode", "topolink ms", "lstopo ms", "ratio", "", "topolink peak RSS MiB",
           "lstopo peak RSS MiB"), rows)


def _compiled_dirs() -> set[Path]:
    return {p for pkg in _PACKAGES for p in (REPO / pkg).rglob("__pycache__")}


def budget(runs: int, venv: Installed, tmp: Path) -> float | None:
    """The start-up budget rows, each paired with its baseline; returns the median of installed ``discover``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "PYTHON", "VIRTUAL_ENV"))}
    ours, lstopo, smi = str(venv.topolink), shutil.which("lstopo-no-graphics"), shutil.which("nvidia-smi")
    bare = (f"{venv.python.name} -I -c pass", [str(venv.python), "-I", "-c", "pass"])
    discover = ["discover", "--format", "json", "-o", str(tmp / "node.json")]
    # (command, its line, the baseline or None where it is missing, the ratio of medians allowed or None: shown)
    checks: list[tuple[str, list[str], tuple[str, list[str]] | None, float | None]] = [
        ("discover --format json -o FILE", [ours, *discover], bare, 3.5),
        ("--help", [ours, "--help"], bare, 1.5),
        ("topo", [ours, "topo"], ("nvidia-smi topo -m", [smi, "topo", "-m"]) if smi else None, 1.0),
        ("discover --help", [ours, "discover", "--help"], bare, None),
        # argparse's own floor: its import and one empty parser, which --help cannot go below (on Python 3.11
        # about 1.7x the bare interpreter: the 1.5x budget is below it)
        ("(argparse's floor: import argparse; ArgumentParser().parse_args([]))",
         [str(venv.python), "-I", "-c", "import argparse; argparse.ArgumentParser().parse_args([])"], bare, None),
        # and the same parser printing its help, as --help does (argparse formats it with textwrap and asks the
        # terminal's width): the floor of --help itself
        ("(argparse's floor for help: ArgumentParser(prog='topolink').parse_args(['--help']))",
         [str(venv.python), "-I", "-c",
          "import argparse; argparse.ArgumentParser(prog='topolink').parse_args(['--help'])"], bare, None),
        ("discover --format json -o FILE", [ours, *discover],
         ("lstopo-no-graphics --of xml FILE", [lstopo, "--of", "xml", "-f", str(tmp / "node.xml")]) if lstopo
         else None, None),
    ]
    rows, discover_ms = [], None
    for name, cmd, baseline, limit in checks:
        allowed = f"<= {limit:g}x" if limit is not None else "information"
        if baseline is None:
            why = "no nvidia-smi on this machine" if name == "topo" else "lstopo-no-graphics not installed"
            rows.append((f"topolink {name}", "", "", "", "", allowed, f"not run: {why}", "", ""))
            continue
        walls, base_walls, cpus, base_cpus = paired_cpu(cmd, baseline[1], runs, env)
        mine, theirs = statistics.median(walls), statistics.median(base_walls)
        discover_ms = mine if name.startswith("discover --format") and discover_ms is None else discover_ms
        ratio = mine / theirs
        cpu_ratio = statistics.median(cpus) / statistics.median(base_cpus)
        verdict = "" if limit is None else "pass" if ratio <= limit else "FAIL"
        shown = name if name.startswith("(") else f"topolink {name}"
        rows.append((shown, f"{mine:.1f}", baseline[0], f"{theirs:.1f}", f"{ratio:.2f}x", allowed,
                     verdict, f"{statistics.median(cpus):.1f} / {statistics.median(base_cpus):.1f}",
                     f"{cpu_ratio:.2f}x"))
    table(f"start-up budget: topolink installed from its wheel, bytecode compiled ({venv.pyc} of {venv.modules} "
          f"modules have their .pyc), measured (median of {runs} paired runs, ratio of medians; beside it the "
          f"same runs' CPU time, user and system, which others' load on a shared machine moves less; load average "
          f"{os.getloadavg()[0]:.2f})",
          ("command", "median ms", "baseline", "baseline median ms", "ratio", "budget", "", "CPU ms / baseline",
           "CPU ratio"), rows)
    instruction_rows(env, [(name, cmd) for name, cmd, baseline, _ in checks if baseline is not None
                            and baseline[1][0] == str(venv.python)], bare)
    return discover_ms


def instructions(cmd: Sequence[str], env: dict[str, str]) -> int | None:
    """Instructions one run of ``cmd`` executes, counted by valgrind (cachegrind, no cache simulation); None
    without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    out = subprocess.run([valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *cmd],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO, check=False)
    found = [line.split()[-1] for line in out.stderr.splitlines() if "I refs:" in line or "I   refs:" in line]
    return int(found[-1].replace(",", "")) if found else None


def instruction_rows(env: dict[str, str], commands: Sequence[tuple[str, list[str]]],
                     bare: tuple[str, list[str]]) -> None:
    """The budget's commands in instructions executed against the bare interpreter's: one run each, the same
    count whatever others run on the machine (time on a shared machine moves with their load); measured."""
    base = instructions(bare[1], env)
    if base is None:
        print("\nvalgrind not installed (apt-get install valgrind): no instruction counts")
        return
    rows = []
    for name, cmd in commands:
        count = instructions(cmd, env)
        shown = name if name.startswith("(") else f"topolink {name}"
        rows.append((shown, f"{count / 1e6:.1f}" if count else "?", f"{base / 1e6:.1f}",
                     f"{count / base:.2f}x" if count else "?"))
    table(f"the same commands in instructions executed (valgrind --tool=cachegrind, one run each; steady under "
          f"others' load; {bare[0]} as baseline)", ("command", "million instructions", "baseline", "ratio"), rows)


_PHASES = """
import sys, time
marks = [("start", time.perf_counter())]
import argparse, re
marks.append(("argparse and re (the command line's and the sources' standard modules)", time.perf_counter()))
import topology.model._entities
marks.append(("the model's classes (topology.model._entities and what it imports)", time.perf_counter()))
import agent.discovery._discover, agent.discovery.assemble, agent.discovery.sources
marks.append(("discovery's modules (sources, assembly, access)", time.perf_counter()))
from agent.cli import main
try:
    main(["discover", "--format", "json", "-o", sys.argv[1]])
except SystemExit:
    pass
marks.append(("the rest: flags, discovery, codec and JSON text, -o", time.perf_counter()))
import json
print(json.dumps({"phases": [(b[0], (b[1] - a[1]) * 1e3) for a, b in zip(marks, marks[1:])]}))
"""


# dataclass() on every class discover builds, timed by wrapping dataclasses.dataclass before our modules
# import it
_CLASSES = """
import dataclasses, json, sys, time
built, real = {}, dataclasses.dataclass
def timed(cls=None, /, **kwargs):
    def wrap(c):
        t = time.perf_counter()
        try:
            return real(**kwargs)(c)
        finally:
            n, ms = built.get(c.__module__.split(".")[0], (0, 0.0))
            built[c.__module__.split(".")[0]] = (n + 1, ms + (time.perf_counter() - t) * 1e3)
    return wrap if cls is None else wrap(cls)
dataclasses.dataclass = timed
from agent.cli import main
try:
    main(["discover", "--format", "json", "-o", sys.argv[1]])
except SystemExit:
    pass
print(json.dumps({"built": built}))
"""


def model_share(runs: int, venv: Installed, tmp: Path, discover_ms: float | None) -> None:
    """Where installed ``discover``'s time goes, phase by phase in one process (each phase's imports only
    what the phases before it did not), and what importing the model costs alone."""
    n = max(runs, 3)
    samples: dict[str, list[float]] = {}
    for _ in range(n):
        out = json.loads(subprocess.run([str(venv.python), "-I", "-c", _PHASES, str(tmp / "phases.json")],
                                        capture_output=True, text=True, check=True).stdout)
        for label, ms in out["phases"]:
            samples.setdefault(label, []).append(ms)
    code = ("import time; {pre}t = time.perf_counter(); import topology.model._entities; "
            "print((time.perf_counter() - t) * 1e3)")
    for label, pre in (("import topology.model._entities alone", ""),
                       ("import topology.model._entities alone, dataclasses imported before", "import dataclasses; ")):
        samples[label] = [float(subprocess.run([str(venv.python), "-I", "-c", code.format(pre=pre)],
                                               capture_output=True, text=True, check=True).stdout) for _ in range(n)]
    counts: dict[str, int] = {}
    for _ in range(n):
        out = json.loads(subprocess.run([str(venv.python), "-I", "-c", _CLASSES, str(tmp / "classes.json")],
                                        capture_output=True, text=True, check=True).stdout)
        for package, (count, ms) in out["built"].items():
            label = f"dataclass() building {package}'s classes during discover"
            counts[label] = count
            samples.setdefault(label, []).append(ms)
    rows = [(label + (f" ({counts[label]} classes)" if label in counts else ""), f"{statistics.median(ms):.1f}",
             f"{statistics.median(ms) / discover_ms:.0%}" if discover_ms else "") for label, ms in samples.items()]
    table(f"installed discover --format json -o FILE phase by phase after the interpreter's start, and the model's "
          f"import alone, measured (median of {n})", ("phase", "ms", "share of installed discover's median"), rows)


def pynvml_row() -> None:
    with tempfile.TemporaryDirectory() as tmp:  # a regular file: never a device such as /dev/null
        code = ("import sys; from agent.cli import main; "
                f"main(['discover', '--format', 'json', '-o', {str(Path(tmp) / 'node.json')!r}]); "
                "print('pynvml' in sys.modules, 'torch' in sys.modules, file=sys.stderr)")
        out = subprocess.run([VENV_PY, "-c", code], capture_output=True, text=True, cwd=REPO, check=False).stderr
    last = out.strip().splitlines()[-1] if out.strip() else "?"
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        loadable = "yes"
    except OSError:
        loadable = "no"
    table("imports of `discover` on this machine",
          ("libnvidia-ml.so.1 loadable", "pynvml imported, torch imported"), [(loadable, last)])


def _median_call(ctx: object, runs: int) -> float:
    from agent.discovery import discover

    discover(ctx)  # type: ignore[arg-type]
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        discover(ctx)  # type: ignore[arg-type]
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def discovery_calls(runs: int, trees: list[tuple[str, Path]]) -> None:
    from agent.discovery.access import DiscoveryContext, FsRoot

    rows = []
    for name, root in trees:
        n = pci_count(root)
        ms = _median_call(DiscoveryContext(root=FsRoot(root)), runs)
        target = 8.0 if n >= 100 else None
        verdict = "" if target is None else ("ok" if ms <= target else "OVER")
        rows.append((name, str(n), f"{ms:.1f}", f"<= {target:g}" if target else "", verdict))
    ms = _median_call(DiscoveryContext(), runs)
    rows.append(("this machine (live /)", str(pci_count(Path("/"))), f"{ms:.1f}", "", ""))
    table(f"discovery call in-process (median of {runs})", ("tree", "PCI functions", "ms", "target", ""), rows)


SCALED_GPUS = (16, 32, 64)  # synthetic NVSwitch machines grown from hgx-h100 (tests/fakenvml/_synthetic.py)


def _pair_calls(calls: dict[str, int]) -> int:
    """NVML calls that name two GPUs (P2P status, common ancestor): their number grows with the GPU pairs."""
    from tests.fakenvml import gpus_named

    return sum(n for key, n in calls.items() if len(gpus_named(key)) == 2)


def profile_rows(runs: int, scaled: Sequence[int] = SCALED_GPUS) -> dict[int, tuple[Snapshot, float]]:
    """The discovery call on hgx-h100 and on synthetic machines of 16, 32 and 64 GPUs grown from it (its
    boards repeated in more PCI domains and NUMA nodes, one NVLink fabric). Time may grow no faster than the
    NVML pair calls. Returns the snapshot and median ms per GPU count, for the ``dumps`` rows."""
    from agent.discovery import discover
    from agent.discovery.access import DiscoveryContext, FsRoot
    from tests.fakenvml import ENV_CALLS, ENV_PROFILE, MACHINES, materialize, write_scaled

    rows, found = [], {}
    hgx = MACHINES / "hgx-h100.yaml"
    base: tuple[float, int] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for gpus in (8, *scaled):
            profile = hgx if gpus == 8 else write_scaled(hgx, gpus, Path(tmp) / "profiles")
            node = materialize(profile, Path(tmp) / f"x{gpus}")
            os.environ[ENV_PROFILE], os.environ[ENV_CALLS] = str(node.nvml_profile), str(node.calls_file)
            ctx = DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library))
            ms = _median_call(ctx, runs)
            found[gpus] = (discover(ctx), ms)
            calls = node.calls()
            pairs = _pair_calls(calls)
            base = base or (ms, pairs)
            time_growth, pair_growth = ms / base[0], pairs / base[1]
            if gpus == 8:
                target, verdict = "<= 15 ms", "ok" if ms <= 15 else "OVER"
            else:
                target, verdict = "ratio <= 1", "ok" if time_growth <= pair_growth else "OVER"
            rows.append((node.machine.name, str(gpus), f"{ms:.1f}", f"{ms / gpus:.2f}", str(sum(calls.values())),
                         str(pairs), f"{time_growth:.2f}x", f"{pair_growth:.1f}x", f"{time_growth / pair_growth:.2f}",
                         target, verdict))
    table(f"discovery call on machine profiles through the test NVML (median of {runs}; growth against 8 GPUs)",
          ("profile", "GPUs", "ms", "ms per GPU", "NVML calls", "NVML pair calls", "time growth", "pair-call growth",
           "time / pair-call growth", "target", ""), rows)
    return found


def _stdlib_indented(snap: Snapshot) -> str:
    import json

    from topology import to_dict

    return json.dumps(to_dict(snap), indent=2, allow_nan=False)


def dumps_rows(runs: int, found: dict[int, tuple[Snapshot, float]]) -> None:
    """``topology.dumps`` indented (the default: discover --format json, the state file, the HTTP API) and
    compact, interleaved, against what indenting with json.dumps costs and against the discovery call."""
    from topology import dumps

    rows = []
    for gpus in sorted({min(found), max(found)}):
        snap, discovery_ms = found[gpus]
        ways = {"indented": partial(dumps, snap), "compact": partial(dumps, snap, indent=None),
                "stdlib": partial(_stdlib_indented, snap)}
        samples: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(runs + 1):
            for name, way in ways.items():
                t0 = time.perf_counter()
                way()
                samples[name].append((time.perf_counter() - t0) * 1e3)
        ms = {name: statistics.median(times[1:]) for name, times in samples.items()}
        rows.append((str(gpus), f"{len(dumps(snap)) / 1e6:.2f}", f"{ms['indented']:.1f}", f"{ms['compact']:.1f}",
                     f"{ms['indented'] / ms['compact']:.2f}", f"{ms['stdlib']:.1f}", f"{discovery_ms:.1f}",
                     "ok" if ms["indented"] < discovery_ms else "OVER"))
    table(f"topology.dumps of the discovered snapshot (median of {runs}, interleaved; target: indented below the "
          "discovery call)", ("GPUs", "indented MB", "indented ms", "compact ms", "indented / compact",
                              "to_dict + json.dumps(indent=2) ms", "discovery ms", ""), rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--only", choices=("budget", "lstopo", "calls", "profiles"), help="one group of tables only")
    ap.add_argument("--scaled-gpus", default=",".join(map(str, SCALED_GPUS)),
                    help="GPU counts of the synthetic NVSwitch machines, comma separated (default %(default)s)")
    ap.add_argument("--trees", default="", help="the hwloc trees of the lstopo and discovery-call tables, by name, "
                    "comma separated (default: every tree in tests/data/hwloc/linux)")
    args = ap.parse_args()
    print(f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}, "
          f"{os.cpu_count()} CPUs, interpreter {VENV_PY}; peak RSS of this process "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    with tempfile.TemporaryDirectory() as tmp:
        only = [n for n in args.trees.split(",") if n]
        trees = hwloc_trees(Path(tmp), only) if args.only in (None, "lstopo", "calls") else []
        if args.only in (None, "budget"):
            venv = install_wheel(REPO, VENV_PY, Path(tmp) / "installed")
            print(f"\ntopolink installed from its wheel into {venv.python.parent.parent} (a temporary virtual "
                  "environment; its dependencies read from this interpreter's), bytecode compiled by pip and "
                  "compileall")
            model_share(args.runs, venv, Path(tmp), budget(args.runs, venv, Path(tmp)))
        if args.only in (None, "lstopo"):
            vs_lstopo(args.runs, trees)
            pynvml_row()
        if args.only in (None, "calls"):
            discovery_calls(args.runs, trees)
        if args.only in (None, "calls", "profiles"):
            scaled = [int(n) for n in args.scaled_gpus.split(",") if n]
            dumps_rows(args.runs, profile_rows(args.runs, scaled))
    return 0


if __name__ == "__main__":
    sys.exit(main())
