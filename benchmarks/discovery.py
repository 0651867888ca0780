"""Discovery speed: prints a table of medians against the targets. Not a test.

    .venv/bin/python benchmarks/discovery.py [--runs N]

Rows: `topolink discover --format json` as a whole process (target <= 300 ms), the discovery call alone
(target <= 20 ms on the largest tree), `topolink --help` (target <= 150 ms for the import), on this machine
and on every hwloc sysfs tree in ../shared/reference/hwloc/linux, and the NVML + sysfs discovery call on
machine profiles through the test NVML library (target <= 50 ms) with its NVML call count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOPOLINK_SHARED", REPO.parent / "shared"))
sys.path.insert(0, str(REPO))

from agent._context import DiscoveryContext  # noqa: E402
from agent._fsroot import FsRoot  # noqa: E402
from agent.discover import discover  # noqa: E402

TOPOLINK = [sys.executable, "-m", "agent.cli"]


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm: page cache, first imports
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def run_process(args: list[str], env: dict[str, str] | None = None) -> Callable[[], object]:
    def go() -> object:
        return subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env,
                              cwd=REPO)
    return go


def hwloc_trees(dest: Path) -> list[tuple[str, Path]]:
    trees = []
    for tarball in sorted((SHARED / "reference/hwloc/linux").glob("*.tar.bz2")):
        out = dest / tarball.name.removesuffix(".tar.bz2")
        out.mkdir()
        with tarfile.open(tarball) as tar:
            tar.extractall(out, filter="tar")
        (root,) = [p for p in out.iterdir() if p.is_dir()]
        trees.append((tarball.name.removesuffix(".tar.bz2"), root))
    return trees


def pci_count(root: Path) -> int:
    return len(list((root / "sys/bus/pci/devices").glob("*")))


def row(name: str, what: str, ms: float, target: float | None, extra: str = "") -> str:
    verdict = "" if target is None else ("ok" if ms <= target else "OVER")
    tgt = "" if target is None else f"<= {target:g}"
    return f"| {name:<36} | {what:<28} | {ms:9.1f} | {tgt:>7} | {verdict:<4} | {extra}"


def profile_rows(runs: int) -> list[str]:
    """NVML + sysfs discovery in this process against the test NVML library of a machine profile."""
    from tests.fakenvml import ENV_CALLS, ENV_PROFILE, materialize

    rows = []
    for name in ("hgx-h100", "dgx-a100"):
        with tempfile.TemporaryDirectory() as tmp:
            node = materialize(name, Path(tmp))
            os.environ[ENV_PROFILE], os.environ[ENV_CALLS] = str(node.nvml_profile), str(node.calls_file)
            ctx = DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library))
            snap = discover(ctx)
            calls = node.calls()  # the calls of the last discovery: one NVML session
            ms = median_ms(lambda ctx=ctx: discover(ctx), runs)  # type: ignore[misc]
            repeated = sum(1 for n in calls.values() if n > 1)
            rows.append(row(f"profile {name}", "discovery call (NVML+sysfs)", ms, 50.0,
                            f"{len(snap.gpus)} GPUs, {sum(calls.values())} NVML calls, {repeated} asked twice"))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    runs = ap.parse_args().runs
    print(f"median of {runs} runs, milliseconds\n")
    print(f"| {'tree':<36} | {'what':<28} | {'median ms':>9} | {'target':>7} | {'':<4} | notes")
    print(f"|{'-' * 38}|{'-' * 30}|{'-' * 11}|{'-' * 9}|{'-' * 6}|------")
    base = median_ms(run_process([sys.executable, "-c", "pass"]), runs)
    helps = median_ms(run_process([*TOPOLINK, "--help"]), runs)
    print(row("this machine", "python startup (baseline)", base, None))
    print(row("this machine", "topolink --help (process)", helps, None))
    print(row("this machine", "--help import time", helps - base, 150.0, "process minus bare interpreter"))
    print(row("this machine", "discover --format json", median_ms(
        run_process([*TOPOLINK, "discover", "--format", "json"]), runs), 300.0))
    print(row("this machine", "discovery call", median_ms(lambda: discover(DiscoveryContext()), runs), None,
              f"{pci_count(Path('/'))} PCI functions"))
    with tempfile.TemporaryDirectory() as tmp:
        for name, root in hwloc_trees(Path(tmp)):
            n = pci_count(root)
            ctx = DiscoveryContext(root=FsRoot(root))
            print(row(name, "discover --format json", median_ms(
                run_process([*TOPOLINK, "discover", "--format", "json", "--sysfs-root", str(root)]), runs), 300.0))
            print(row(name, "discovery call", median_ms(lambda ctx=ctx: discover(ctx), runs),  # type: ignore[misc]
                      20.0 if n >= 100 else None, f"{n} PCI functions"))
    for line in profile_rows(runs):
        print(line)


if __name__ == "__main__":
    main()
