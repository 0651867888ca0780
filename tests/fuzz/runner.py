"""The fuzz runner: base trees and their clean runs, seeded cases, two at a time, every failure collected."""

from __future__ import annotations

import itertools
import json
import os
import random
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agent.discovery.assemble import witnessed
from tests.fakenvml import load_machine, nvml_lines, profile_path, read_calls
from topology import SchemaError, Snapshot, loads

from . import _exec, contradict, io_cases, mutators, oracle, witness_cases
from ._cases import Baseline, Case, Result
from ._checks import check_process, check_snapshot, check_snapshot_run, check_topo_run, check_witness_run
from ._targets import find_targets
from ._trees import HWLOC_TREES, PROFILES, BaseTree, copy_tree, hwloc_base, materialize_profile, remove_tree, restore
from .io_cases import IoCase
from .nvml_cases import edited, faults
from .snapshots import EDITS as SNAPSHOT_KINDS
from .snapshots import broken_snapshots

TOPO_EVERY = 6  # one case in six renders `topolink topo` instead of `discover --format json`


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
            snaps.append(witnessed(loads(text)))  # what discovery writes, the reader reads
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
        n_snap = max(len(SNAPSHOT_KINDS), self.n_cases * 6 // 100)  # every kind of broken document once
        n_nvml = self.n_cases * 30 // 100
        n_io = max(4, self.n_cases * 8 // 100)
        n_contra = max(4, self.n_cases * 10 // 100)
        n_witness = max(len(witness_cases.PLANNERS), self.n_cases * 10 // 100)
        n_sysfs = max(0, self.n_cases - n_snap - n_nvml - n_io - n_contra - n_witness)
        cases: list[Case] = []
        hgx = self.baselines["hgx-h100"]
        for i, broken in enumerate(broken_snapshots(hgx.doc, random.Random(f"{self.seed}:snap"), n_snap)):
            cases.append(Case(f"snapshot#{i}", hgx.tree, "topo-from", broken=broken))
        for i, io in enumerate(io_cases.io_cases(random.Random(f"{self.seed}:io"), n_io)):
            cases.append(Case(f"io#{i}", hgx.tree, io.command, io=io))
        profiles = [self.baselines[p] for p in PROFILES]
        pools = {b.tree.name: faults(b.calls, random.Random(f"{self.seed}:{b.tree.name}")) for b in profiles}
        for i in range(n_nvml):
            b = profiles[i % len(profiles)]
            pool = pools[b.tree.name]
            fault = pool[(i // len(profiles)) % len(pool)]
            cases.append(Case(f"{b.tree.name}#nvml{i}", b.tree, "topo" if i % TOPO_EVERY == 3 else "discover",
                              fault=fault))
        trees = list(self.baselines.values())
        for i in range(n_contra):
            b = trees[i % len(trees)]
            files = tuple(f for paths in b.targets.files.values() for f in paths)
            m = contradict.plan(random.Random(f"{self.seed}:{b.tree.name}:contra{i}"), b.snap, b.tree.root, files)
            if m is not None:
                cases.append(Case(f"{b.tree.name}#contra{i}", b.tree, "topo" if i % 4 == 1 else "discover",
                                  mutation=m))
        cases += self._plan_witness(n_witness, trees)
        for i in range(n_sysfs):
            b = trees[i % len(trees)]
            m = mutators.plan(random.Random(f"{self.seed}:{b.tree.name}:{i}"), b.tree.root, b.targets)
            cases.append(Case(f"{b.tree.name}#{i}", b.tree, "topo" if i % TOPO_EVERY == 5 else "discover",
                              mutation=m))
        rng.shuffle(cases)
        return cases

    def _plan_witness(self, n: int, trees: list[Baseline]) -> list[Case]:
        """One witness of every row of the witness table in turn, each on the next tree that has its pair."""
        keys = sorted(witness_cases.PLANNERS)
        cases = []
        for i in range(n):
            key = keys[i % len(keys)]
            for j in range(len(trees)):
                b = trees[(i // len(keys) + i + j) % len(trees)]
                nvml = b.tree.nvml_profile.read_text().splitlines() if b.tree.nvml_profile else None
                w = witness_cases.plan(random.Random(f"{self.seed}:{b.tree.name}:witness{i}"), key, b.snap,
                                       b.tree.root, nvml)
                if w is not None:
                    cases.append(Case(f"{b.tree.name}#witness{i}", b.tree, "topo" if i % 5 == 2 else "discover",
                                      witness=w))
                    break
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
            return Result(case, run, check_snapshot_run(case.broken, run))
        if case.io is not None:
            return self._run_io_case(case, case.io, d)
        if case.witness is not None:
            return self._run_witness_case(case, case.witness, base, d)
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
            machine = load_machine(profile_path(tree.profile or tree.name), {"inject": case.fault.rules})
            nvml_profile = d / "nvml-profile.txt"
            nvml_profile.write_text("\n".join(edited(nvml_lines(machine), case.fault.edit)) + "\n")
            os.chmod(nvml_profile, 0o444)
        return self._run_tree(case, base, tree.root, nvml_profile, d)

    def _run_witness_case(self, case: Case, w: witness_cases.WitnessCase, base: Baseline, d: Path) -> Result:
        root = self._work_tree(case.tree)
        nvml_profile = case.tree.nvml_profile
        if w.edit.nvml is not None:
            nvml_profile = d / "nvml-profile.txt"
            nvml_profile.write_text("\n".join(w.edit.nvml) + "\n")
            os.chmod(nvml_profile, 0o444)
        try:
            w.apply(root)
            result = self._run_tree(case, base, root, nvml_profile, d)
        finally:
            restore(root, case.tree.root, w.touched(case.tree.root))
        result.errors += check_witness_run(w, result.run, result.snap)
        return result

    def _run_io_case(self, case: Case, io: IoCase, d: Path) -> Result:
        run, errors = io_cases.run(io, d, self._root_args(case.tree, case.tree.root), case.tree.nvml_profile)
        return Result(case, run, errors)

    def _run_tree(self, case: Case, base: Baseline, root: Path, nvml_profile: Path | None, d: Path) -> Result:
        tree = case.tree
        lost = case.fault.lost_gpu if case.fault else None
        if case.command == "topo":
            run = self._topo(tree, root, d, nvml_profile)
            return Result(case, run, check_topo_run(base.clean, lost, run))
        run = self._discover(tree, root, d, nvml_profile)
        result = Result(case, run, check_process(run))
        out = d / "snap.json"
        if run.returncode not in (0, 1):
            return result
        try:
            size = out.stat().st_size
            snap = witnessed(loads(out.read_text()))  # the reader's every rule, as --from holds it to
        except (OSError, SchemaError, UnicodeDecodeError) as exc:
            result.errors.append(f"exit {run.returncode} but no readable snapshot at -o: {exc}")
            return result
        result.errors += check_snapshot(base.clean, lost, run, snap, size)
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
