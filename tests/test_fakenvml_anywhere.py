"""The machine-profile runner works from any directory through ``scripts/fakenvml`` (CONTRIBUTING.md): from a
directory outside the repository, with a profile by name and one by a path relative to the caller, the command
runs against the profile and its exit status is the command's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "fakenvml"


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_") and k != "PYTHONPATH"}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, timeout=300, check=False,
                          env={**env, "PYTHON": sys.executable})


def test_a_profile_by_name_from_elsewhere(tmp_path: Path) -> None:
    run = _run(tmp_path, "run", "hgx-h100", "--", "topolink", "topo")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[1].startswith("GPU0\t X \tNV18")


def test_a_relative_profile_and_the_commands_status(tmp_path: Path) -> None:
    shutil.copy(REPO / "tests/machines/hgx-h100.yaml", tmp_path / "my-box.yaml")
    run = _run(tmp_path, "run", "my-box.yaml", "--", sys.executable, "-c", "import os, sys; "
               "sys.exit(7 if os.environ['TOPOLINK_SYSFS_ROOT'] else 0)")
    assert run.returncode == 7, run.stderr


def test_the_module_alone_needs_the_repository_root(tmp_path: Path) -> None:
    """Why the script exists: tests/ is no installed package."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-m", "tests.fakenvml", "build"], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=60, check=False)
    assert run.returncode != 0 and "No module named 'tests'" in run.stderr
