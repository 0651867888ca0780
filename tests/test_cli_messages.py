"""What the commands say when they cannot do what was asked, and the wording of their tables: each message
names the way on (the command to run, the flag to change), as a user reads it in a real process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakenvml import FakeNode, materialize

REPO = Path(__file__).resolve().parents[1]


def topolink(*args: str, node: FakeNode | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | (node.env() if node else {})
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**env, "PYTHONPATH": str(REPO)}, timeout=120, check=False)


@pytest.fixture(scope="module")
def hgx(tmp_path_factory: pytest.TempPathFactory) -> FakeNode:
    return materialize("hgx-h100", tmp_path_factory.mktemp("hgx"))


def test_topo_bandwidth_without_measurements_says_how_to_hand_a_report_back(hgx: FakeNode) -> None:
    run = topolink("topo", "--bandwidth", node=hgx)
    assert run.returncode == 0, run.stderr
    assert run.stdout == ("no measured bandwidth in this snapshot: measure with `topolink probe --format json -o "
                          "report.json`, then show it with `topolink topo --from report.json --bandwidth`\n")


def test_probe_on_cuda_without_a_gpu_says_there_is_no_gpu_not_no_cupy() -> None:
    """Probes measure the live machine only; the test machine without NVIDIA GPUs is the case."""
    run = topolink("probe", "--backend", "cuda", "--tests", "device_local_copy")
    if "No NVIDIA GPU found" not in run.stderr:
        pytest.fail(f"expected the no-GPU line (this test needs a host without NVIDIA GPUs): {run.stderr}")
    assert run.returncode == 4 and run.stdout == ""
    assert "CuPy" not in run.stderr and "--backend cpu" in run.stderr and run.stderr.count("\n") == 1


def test_selftest_names_itself_when_it_refuses_a_tree(hgx: FakeNode) -> None:
    run = topolink("selftest", node=hgx)
    assert run.returncode == 2 and run.stderr.startswith("topolink selftest: refusing to measure: ")
    assert "Run probe" not in run.stderr


def test_place_says_one_gpu_and_one_group_in_the_singular(hgx: FakeNode) -> None:
    one = topolink("place", "--gpus", "1", "--top", "1", node=hgx)
    assert one.returncode == 0 and one.stdout.startswith("Best groups of 1 GPU on hgx-h100 ")
    eight = topolink("place", "--gpus", "8", node=hgx)
    assert "search: 1 group evaluated" in eight.stdout


def test_place_explains_a_bus_bandwidth_above_its_bottleneck(hgx: FakeNode) -> None:
    run = topolink("place", "--gpus", "8", node=hgx)
    row = next(line for line in run.stdout.splitlines() if line.startswith("1 "))
    assert "nvls" in row and "417 GB/s" in row and "66 GB/s" in row
    assert "est. busbw above the bottleneck's rate: through NVSwitches" in run.stdout


def test_discover_sh_writes_relative_paths_where_it_was_run(tmp_path: Path) -> None:
    """The script sets up .venv in the repository but runs topolink in the caller's directory: a stand-in
    ``topolink`` in a copy of the layout records where it ran."""
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    (repo / "scripts").mkdir(parents=True)
    (repo / ".venv/bin").mkdir(parents=True)
    elsewhere.mkdir()
    shutil.copy(REPO / "scripts/discover.sh", repo / "scripts/discover.sh")
    fake = repo / ".venv/bin/topolink"
    fake.write_text('#!/bin/sh\necho "$PWD $*"\n')
    fake.chmod(0o755)
    run = subprocess.run([str(repo / "scripts/discover.sh"), "-o", "node.json"], capture_output=True, text=True,
                         cwd=elsewhere, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"{elsewhere} discover -o node.json\n"


def test_image_sh_says_first_that_the_engine_does_not_answer(tmp_path: Path) -> None:
    """A stand-in docker whose daemon is down: image.sh says so before making anything (no wheelhouse)."""
    fake = tmp_path / "docker"
    fake.write_text('#!/bin/sh\n[ "$1" = info ] && { echo "Cannot connect to the Docker daemon" >&2; exit 1; }\n'
                    'echo "$*" >> "$(dirname "$0")/calls"\n')
    fake.chmod(0o755)
    env = {**os.environ, "ENGINE": "docker", "PATH": f"{tmp_path}:{os.environ['PATH']}", "PYTHON": "/bin/false"}
    for command in ("build", "base"):
        run = subprocess.run([str(REPO / "scripts/image.sh"), command], capture_output=True, text=True, env=env,
                             timeout=60, check=False)
        assert run.returncode == 2 and run.stdout == ""
        assert run.stderr == ("image.sh: docker does not answer (`docker info` failed: Cannot connect to the Docker "
                              "daemon); start it (the docker daemon) or pick the other with ENGINE=podman|docker\n")
    assert not (tmp_path / "calls").exists()


def test_image_sh_names_the_image_by_the_distribution_version() -> None:
    """The default tag's version is the one the wheel is built with (agent.__version__, which pyproject.toml
    reads): the line image.sh computes it with, run as it stands in the script."""
    from agent import __version__

    line = next(x for x in (REPO / "scripts/image.sh").read_text().splitlines() if x.startswith("version="))
    run = subprocess.run(["bash", "-c", f'repo="$1"; {line}; printf %s "$version"', "-", str(REPO)],
                         capture_output=True, text=True, timeout=30, check=True)
    assert run.stdout == __version__
