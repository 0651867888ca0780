"""The fuzz runner: base trees and their clean runs, seeded cases, two at a time, every failure collected."""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakenvml import load_machine, nvml_lines, profile_path, read_calls
from topology import Aspect, SchemaError, Snapshot, loads

from . import _exec, mutators, oracle
from ._targets import Targets, find_targets
from ._trees import HWLOC_TREES, PROFILES, BaseTree, copy_tree, hwloc_base, materialize_profile, remove_tree, restore
from .nvml_cases import NvmlFault, faults
from .snapshots import BrokenSnapshot, broken_snapshots

TOPO_EVERY = 6  # one case in six renders `topolink topo` instead of `discover --format json`


@dataclass(frozen=True)
class Case:
    id: str
    tree: BaseTree
    command: str  # discover | topo | topo-from
    mutation: mutators.Mutation | None = None
    fault: NvmlFault | None = None
    broken: BrokenSnapshot | None = None

    def what(self) -> str:
        return str(self.mutation or self.fault or self.broken or "clean")


@dataclass(frozen=True)
class Baseline:
    tree: BaseTree
    snap: Snapshot
    json_size: int
    topo: str
    calls: dict[str, int]
    targets: Targets
    doc: dict[str, object]


@dataclass
class Result:
    case: Case
    run: _exec.Run | None
    errors: list[str] = field(default_factory=list)
    snap: Snapshot | None = None

    @property
    def outcome(self) -> str:
        if self.run is None:
            return "not run"
        if self.run.timed_out:
            return "timeout"
        rc = self.run.returncode or 0
        return f"signal {-rc}" if rc < 0 else f"exit {rc}"

    def report(self, seed: int) -> str:
        lines = [f"[{self.case.id}, seed {seed}] {self.case.tree.name}: {self.case.what()}"]
        if self.run is not None:
            tail = self.run.stderr.strip()[-600:].replace("\n", "\n      ")
            lines += [f"    command: {self.run.command()}",
                      f"    {self.outcome} after {self.run.seconds:.2f} s; stderr: {tail or '(empty)'}"]
        lines += [f"    - {e}" for e in self.errors[:12]]
        if len(self.errors) > 12:
            lines.append(f"    - ... and {len(self.errors) - 12} more")
        return "\n".join(lines)


class Suite:
    """``Suite(seed, n).run()`` -> results. Work happens in a directory the unprivileged user can read."""

    def __init__(self, seed: int, n_cases: int, hwloc: Callable[[str], Path]) -> None:
        self.seed, self.n_cases, self.hwloc = seed, n_cases, hwloc
        self.privileges = ""
        self.prepare_seconds = 0.0
        self._work_trees: dict[tuple[str, int], Path] = {}
        self._lock = threading.Lock()
        self.work = Path(tempfile.mkdtemp(prefix="topolink-fuzz-"))
        os.chmod(self.work, 0o755)
        self.baselines: dict[str, Baseline] = {}
        self._serial = itertools.count()
        self.live_pci = set(os.listdir("/sys/bus/pci/devices")) if os.path.isdir("/sys/bus/pci/devices") else set()

    def close(self) -> None:
        remove_tree(self.work)

    # -- preparation ----------------------------------------------------------------------------------------
    def prepare(self) -> None:
        self.privileges = _exec.check_privileges(self.work)
        trees = [hwloc_base(n, self.hwloc(f"{n}.tar.bz2"), self.work / "base" / n) for n in HWLOC_TREES]
        trees += [materialize_profile(p, self.work / "base" / p) for p in PROFILES]
        with ThreadPoolExecutor(2) as pool:
            for b in pool.map(self._baseline, trees):
                self.baselines[b.tree.name] = b

    def _case_dir(self) -> Path:
        d = self.work / f"case-{next(self._serial)}"
        d.mkdir(parents=True)
        os.chmod(d, 0o777)
        return d

    def _work_tree(self, tree: BaseTree) -> Path:
        """This thread's own copy of ``tree``: mutated for one case, then restored."""
        key = (tree.name, threading.get_ident())
        with self._lock:
            if key not in self._work_trees:
                self._work_trees[key] = self.work / f"w{len(self._work_trees)}"
                fresh = True
            else:
                fresh = False
        if fresh:
            copy_tree(tree.root, self._work_trees[key] / tree.root.name)
        return self._work_trees[key] / tree.root.name

    def _baseline(self, tree: BaseTree) -> Baseline:
        snaps, runs = [], []
        for _ in range(2):  # twice: the oracle needs discovery to be deterministic on a clean tree
            d = self._case_dir()
            run = self._discover(tree, tree.root, d, tree.nvml_profile)
            if run.returncode not in (0, 1) or not (d / "snap.json").exists():
                raise RuntimeError(f"clean run of {tree.name}: exit {run.returncode}\n{run.stderr[-2000:]}")
            text = (d / "snap.json").read_text()
            snaps.append(loads(text))
            runs.append((text, read_calls(d / "calls.txt")))
        unstable = oracle.diff(snaps[0], snaps[1]) + oracle.diff(snaps[1], snaps[0])
        if unstable:
            raise RuntimeError(f"two clean runs of {tree.name} differ: {unstable[:5]}")
        topo = self._topo(tree, tree.root, self._case_dir(), tree.nvml_profile)
        return Baseline(tree=tree, snap=snaps[0], json_size=len(runs[0][0]), topo=topo.stdout, calls=runs[0][1],
                        targets=find_targets(tree.root), doc=json.loads(runs[0][0]))

    # -- processes ----------------------------------------------------------------------------------------
    def _env(self, tree: BaseTree, d: Path, nvml_profile: Path | None) -> dict[str, str]:
        extra = {"TOPOLINK_FAKENVML_CALLS": str(d / "calls.txt")}
        if nvml_profile is not None:
            extra["TOPOLINK_FAKENVML_PROFILE"] = str(nvml_profile)
        return _exec.child_env(extra)

    def _root_args(self, tree: BaseTree, root: Path) -> list[str]:
        args = ["--sysfs-root", str(root)]
        return args + (["--nvml-library", str(tree.nvml_library)] if tree.nvml_library else [])

    def _discover(self, tree: BaseTree, root: Path, d: Path, nvml_profile: Path | None) -> _exec.Run:
        argv = [*_exec.topolink(), "discover", "--format", "json", "-o", str(d / "snap.json"),
                *self._root_args(tree, root)]
        return _exec.run(argv, self._env(tree, d, nvml_profile), d)

    def _topo(self, tree: BaseTree, root: Path, d: Path, nvml_profile: Path | None) -> _exec.Run:
        return _exec.run([*_exec.topolink(), "topo", *self._root_args(tree, root)],
                         self._env(tree, d, nvml_profile), d)

    # -- cases ----------------------------------------------------------------------------------------------
    def plan(self) -> list[Case]:
        rng = random.Random(self.seed)
        n_snap = max(8, self.n_cases * 6 // 100)
        n_nvml = self.n_cases * 30 // 100
        n_sysfs = self.n_cases - n_snap - n_nvml
        cases: list[Case] = []
        hgx = self.baselines["hgx-h100"]
        for i, broken in enumerate(broken_snapshots(hgx.doc, random.Random(f"{self.seed}:snap"), n_snap)):
            cases.append(Case(f"snapshot#{i}", hgx.tree, "topo-from", broken=broken))
        profiles = [self.baselines[p] for p in PROFILES]
        pools = {b.tree.name: faults(b.calls, random.Random(f"{self.seed}:{b.tree.name}")) for b in profiles}
        for i in range(n_nvml):
            b = profiles[i % len(profiles)]
            pool = pools[b.tree.name]
            fault = pool[(i // len(profiles)) % len(pool)]
            cases.append(Case(f"{b.tree.name}#nvml{i}", b.tree, "topo" if i % TOPO_EVERY == 3 else "discover",
                              fault=fault))
        trees = list(self.baselines.values())
        for i in range(n_sysfs):
            b = trees[i % len(trees)]
            m = mutators.plan(random.Random(f"{self.seed}:{b.tree.name}:{i}"), b.tree.root, b.targets)
            cases.append(Case(f"{b.tree.name}#{i}", b.tree, "topo" if i % TOPO_EVERY == 5 else "discover",
                              mutation=m))
        rng.shuffle(cases)
        return cases

    def run(self, cases: list[Case]) -> list[Result]:
        with ThreadPoolExecutor(2) as pool:
            return list(pool.map(self.run_case, cases))

    def run_case(self, case: Case) -> Result:
        d = self._case_dir()
        try:
            return self._run_case(case, d)
        except _exec.PrivilegeDropError:
            raise
        except Exception as exc:  # a harness error must name its case, not hide the others
            return Result(case, None, [f"harness error: {exc!r}"])
        finally:
            remove_tree(d)

    def _run_case(self, case: Case, d: Path) -> Result:
        base = self.baselines[case.tree.name]
        tree = case.tree
        if case.broken is not None:
            path = d / "snapshot.json"
            path.write_bytes(case.broken.data)
            os.chmod(path, 0o444)
            run = _exec.run([*_exec.topolink(), "topo", "--from", str(path)], _exec.child_env({}), d)
            return Result(case, run, _check_snapshot_run(case.broken, run))
        if case.mutation is None:
            return self._run_nvml_case(case, base, d)
        root = self._work_tree(tree)
        decoys = d / "decoys"
        decoys.mkdir()
        os.chmod(decoys, 0o755)
        try:
            mutators.apply(case.mutation, root, decoys)
            result = self._run_tree(case, base, root, tree.nvml_profile, d)
        finally:
            restore(root, tree.root, mutators.touched(case.mutation))
        if result.snap is not None:
            result.errors += self._check_escape(base, case, result.snap, d, root)
        return result

    def _run_nvml_case(self, case: Case, base: Baseline, d: Path) -> Result:
        tree, nvml_profile = case.tree, case.tree.nvml_profile
        if case.fault is not None:
            machine = load_machine(profile_path(tree.profile or tree.name), {"inject": [dict(case.fault.rule)]})
            nvml_profile = d / "nvml-profile.txt"
            nvml_profile.write_text("\n".join(nvml_lines(machine)) + "\n")
            os.chmod(nvml_profile, 0o444)
        return self._run_tree(case, base, tree.root, nvml_profile, d)

    def _run_tree(self, case: Case, base: Baseline, root: Path, nvml_profile: Path | None, d: Path) -> Result:
        tree = case.tree
        if case.command == "topo":
            run = self._topo(tree, root, d, nvml_profile)
            return Result(case, run, _check_topo_run(base, case, run))
        run = self._discover(tree, root, d, nvml_profile)
        result = Result(case, run, _check_process(run))
        out = d / "snap.json"
        if run.returncode not in (0, 1):
            return result
        try:
            size = out.stat().st_size
            snap = loads(out.read_text())
        except (OSError, SchemaError, UnicodeDecodeError) as exc:
            result.errors.append(f"exit {run.returncode} but no readable snapshot at -o: {exc}")
            return result
        result.errors += _check_snapshot(base, case, run, snap, size)
        result.snap = snap
        return result

    def _check_escape(self, base: Baseline, case: Case, snap: Snapshot, d: Path, root: Path) -> list[str]:
        m = case.mutation
        if m is None:
            return []
        errors = [f"a PCI function of the live host appeared: {pid}" for pid in
                  sorted({f.id for f in snap.pci} - {f.id for f in base.snap.pci}) if pid in self.live_pci]
        if m.leak_ref is None:
            return errors
        ref_dir = d / "leak-ref"
        ref_dir.mkdir()
        os.chmod(ref_dir, 0o777)
        ref_mutation = mutators.Mutation("leak-ref", m.path, m.leak_ref)
        try:
            mutators.apply(ref_mutation, root, ref_dir)
            run = self._discover(case.tree, root, ref_dir, case.tree.nvml_profile)
        finally:
            restore(root, case.tree.root, mutators.touched(ref_mutation))
        if run.returncode in (0, 1):
            ref = loads((ref_dir / "snap.json").read_text())
            errors += [f"leak: {e}" for e in oracle.leaked(base.snap, snap, ref)]
        return errors


def _check_process(run: _exec.Run) -> list[str]:
    if run.timed_out:
        return [f"no result within {_exec.WALL_LIMIT:.0f} s (killed)"]
    rc = run.returncode or 0
    errors = []
    if rc < 0:
        errors.append(f"killed by signal {-rc} (memory limit {_exec.MEMORY_LIMIT >> 20} MiB?)")
    elif rc not in (0, 1, 3):
        errors.append(f"exit {rc}: only 0, 1 or 3 are allowed")
    if "Traceback" in run.stderr:
        errors.append("traceback: " + run.stderr.strip().splitlines()[-1][:300])
    if rc == 3 and not run.stderr.strip():
        errors.append("exit 3 with nothing on stderr")
    return errors


def _check_snapshot(base: Baseline, case: Case, run: _exec.Run, snap: Snapshot, size: int) -> list[str]:
    errors = []
    if run.returncode == 0 and not snap.complete:
        errors.append(f"exit 0 but the snapshot is not complete (unknown: {oracle.describe(snap)})")
    if run.returncode == 1:
        if snap.complete:
            errors.append("exit 1 but the snapshot says it is complete")
        elif not snap.unknown:
            bad = [f"{o.name}={o.status.value}" for o in snap.sources if o.status.value not in ("ok", "absent")]
            errors.append(f"exit 1 and no problem names an unknown fact (sources: {', '.join(bad)})")
        errors += oracle.unknown_not_listed(run.stderr, snap.unknown)
    if size > max(10 * base.json_size, base.json_size + (1 << 20)):
        errors.append(f"the snapshot grew from {base.json_size} to {size} bytes")
    facts = oracle.diff(base.snap, snap)
    if facts and snap.complete:
        facts = [f"complete snapshot differs from the clean one: {e}" for e in facts]
    errors += facts
    lost = case.fault.lost_gpu if case.fault else None
    gone = [g.id for g in base.snap.gpus
            if lost is not None and g.index == lost and g.id not in {x.id for x in snap.gpus}]
    if gone:
        errors.append(f"the lost GPU {gone[0]} vanished from the snapshot (it must stay, marked lost)")
    return errors


def _check_topo_run(base: Baseline, case: Case, run: _exec.Run) -> list[str]:
    errors = _check_process(run)
    if run.returncode == 0 and run.stdout != base.topo:
        errors.append("exit 0 (complete) but topo differs from the clean tree's:\n"
                      + oracle.text_diff(base.topo, run.stdout))
    if run.returncode == 1 and not any(a.value in run.stderr for a in Aspect):
        errors.append("exit 1 but stderr names no unknown fact")
    if case.fault is not None and case.fault.lost_gpu is not None and run.returncode in (0, 1):
        rows = [ln for ln in run.stdout.splitlines() if ln.startswith("GPU")]
        want = [ln for ln in base.topo.splitlines() if ln.startswith("GPU")]
        if len(rows) < len(want):
            errors.append(f"topo shows {len(rows)} GPU rows, the clean run {len(want)}: the lost GPU's row is gone")
    return errors


def _check_snapshot_run(broken: BrokenSnapshot, run: _exec.Run) -> list[str]:
    errors = _check_process(run)
    if run.timed_out or (run.returncode or 0) < 0:
        return errors
    if broken.strict and run.returncode != 3:
        errors.append(f"a broken snapshot ({broken.kind}) gave exit {run.returncode}, not 3"
                      + (f"; stdout: {run.stdout[:200]!r}" if run.stdout else ""))
    if run.returncode == 3 and len(run.stderr.strip().splitlines()) != 1:
        errors.append(f"exit 3 should say one line on stderr, said {len(run.stderr.strip().splitlines())}")
    if "NV-" in run.stdout:
        errors.append("rendered a negative NVLink count (NV-)")
    return errors


def tally(results: list[Result]) -> Counter[str]:
    return Counter(r.outcome for r in results)


def cleanup_stale(prefix: str = "topolink-fuzz-") -> None:
    """Work directories of runs that were killed (older than a day) would fill /tmp: remove them."""
    import time

    tmp = Path(tempfile.gettempdir())
    for p in tmp.glob(prefix + "*"):
        if time.time() - p.stat().st_mtime > 86400:
            shutil.rmtree(p, ignore_errors=True)
