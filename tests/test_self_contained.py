"""The repository stands alone: nothing it holds reads or names a path outside it, and every benchmark the
contributors' guide lists starts (each at its smallest setting, a few seconds: a smoke test, not a measurement)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reference_data import DATA, HWLOC_LINUX, TOPO

REPO = Path(__file__).resolve().parents[1]
# A relative path up out of the checkout into a sibling folder of reference data, or the variable that
# used to point at one: users who clone the repository have neither.
_SIBLING = "sha" + "red"  # spelt in two parts so that this guard names no such folder itself
_OUTSIDE = re.compile(r"\.\./+" + _SIBLING + r"\b|TOPOLINK_" + _SIBLING.upper())
# The exceptions: CI's provisioning steps, which unpack envtest's binaries (and a slurmctld build) kept beside the
# checkout on the CI machine into a temporary folder and name it in $KUBEBUILDER_ASSETS ($TOPOLINK_SLURM_BIN), as a
# CI environment provides them.
_CI_PROVISIONING = (".ci/run", f'envtest="$src/../{_SIBLING}/tools/kube-apiserver/bin.tar.xz"')
_CI_SLURM = (".ci/run", f'slurm="$src/../{_SIBLING}/tools/slurm/slurm.tar.xz"')


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [REPO / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_refers_to_a_folder_beside_the_repository() -> None:
    offenders = []
    for path in _tracked():
        if not path.is_file() or path.suffix in {".bz2", ".png", ".xz"} or path == Path(__file__).resolve():
            continue
        text = path.read_bytes().decode(errors="replace")
        offenders += [f"{path.relative_to(REPO)}:{n}" for n, line in enumerate(text.splitlines(), 1)
                      if _OUTSIDE.search(line)
                      and (str(path.relative_to(REPO)), line.strip()) not in (_CI_PROVISIONING, _CI_SLURM)]
    assert offenders == []


def test_only_ci_provisions_envtest_from_beside_the_checkout_and_only_once() -> None:
    where, line = _CI_PROVISIONING
    script = (REPO / where).read_text().splitlines()
    assert [s.strip() for s in script].count(line) == 1
    # used once, to unpack into a temporary folder named as envtest's assets, never into the clone
    uses = [s for s in script if '"$envtest"' in s]
    assert len(uses) == 2 and any(re.search(r'tar -xJf "\$envtest" -C "\$assets"', s) for s in uses), uses
    assert any(s.strip() == 'assets="$(mktemp -d)"' for s in script)


def test_only_ci_provisions_slurm_from_beside_the_checkout_and_only_once() -> None:
    where, line = _CI_SLURM
    script = (REPO / where).read_text().splitlines()
    assert [s.strip() for s in script].count(line) == 1
    uses = [s for s in script if '"$slurm"' in s]
    assert len(uses) == 2 and any(re.search(r'tar -xJf "\$slurm" -C "\$slurm_bin"', s) for s in uses), uses
    assert any(s.strip() == 'slurm_bin="$(mktemp -d)"' for s in script)


def test_every_data_file_is_listed_in_the_data_readme() -> None:
    readme = (DATA / "README.md").read_text()
    files = [p for p in DATA.rglob("*") if p.is_file() and p.name != "README.md"]
    assert files
    unlisted = [str(p.relative_to(DATA)) for p in files if f"`{p.relative_to(DATA)}`" not in readme]
    assert unlisted == []


def test_the_hwloc_trees_travel_with_their_licence() -> None:
    assert "BSD" in (HWLOC_LINUX.parent / "COPYING").read_text() or "Redistribution" in (
        HWLOC_LINUX.parent / "COPYING").read_text()
    assert sorted(HWLOC_LINUX.glob("*.tar.bz2")) and sorted(TOPO.glob("*.txt"))


# The smallest setting of each benchmark: enough to import everything and print its tables (each table's every
# kind of row: startup.py's one hwloc tree is the one of 100 PCI functions or more, which has a target row).
SMALLEST: dict[str, list[str]] = {
    "startup.py": ["--runs", "1", "--scaled-gpus", "16", "--trees", "32em64t-2n8c+dax+nvme+mic+dimms"],
    "probes.py": ["--mib", "1", "--runs", "1"],
    "serve.py": ["--scrapes", "20", "--idle-seconds", "0.2", "--slow-clients", "20", "--slow-seconds", "0.5",
                 "--slow-rounds", "1", "--soak-seconds", "2", "--soak-every", "1"],
    "serve_memory.py": ["--scrapes", "20"],
    "fleet.py": ["--nodes", "20", "--days", "1", "--sample", "1", "--sample-days", "1", "--traffic-passes", "2",
                 "--watch-seconds", "1"],
    "gpu_crosscheck.py": ["--rounds", "1", "--mib", "1"],
    "anchor_check.py": ["--max-size", "1M", "--small-mib", "1"],
    "placement.py": ["--runs", "1", "--nodes", "200"],
    "codec.py": ["--runs", "1", "--gpus", "8"],
    "limits.py": ["--steps", "1"],
    "pages.py": ["--runs", "1", "--machines", "rtx5090-2x"],
    "controller.py": ["--nodes", "40", "--repeat", "1"],
    "faults.py": ["--agents", "3", "--interval", "1", "--before", "1", "--during", "2", "--faults", "500",
                  "--controller-nodes", "10"],
}
_LISTED = re.compile(r"^\S*python benchmarks/(\w+\.py)\b", re.MULTILINE)


def test_the_readme_lists_every_benchmark_and_each_has_a_smallest_setting() -> None:
    listed = set(_LISTED.findall((REPO / "CONTRIBUTING.md").read_text()))
    scripts = {p.name for p in (REPO / "benchmarks").glob("*.py") if not p.name.startswith("_")}
    assert listed == scripts
    assert set(SMALLEST) == scripts


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SMALLEST))
def test_each_benchmark_runs_at_its_smallest_setting(script: str) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *SMALLEST[script]], cwd=REPO,
                          capture_output=True, text=True, timeout=240, env=env, check=False)
    if script in ("gpu_crosscheck.py", "anchor_check.py") and proc.returncode == 2:
        # Without a GPU (and the anchors) it says what it lacks and stops: its imports and options were checked.
        assert re.search(r"(gpu_crosscheck|anchor_check): (needs \w+|no CUDA device)", proc.stderr), proc.stderr
        return
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert re.search(r"\d", proc.stdout), proc.stdout  # a table with figures in it
