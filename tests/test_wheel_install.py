"""The container image's install path without a container runtime: the files scripts/image.sh packages are
built into a wheel, the wheel is installed with its dependencies, held to the image's pins
(daemonset/image/requirements.txt), into a fresh virtual environment outside the source tree, and the
installed ``topolink`` answers ``serve --help``, ``discover`` and serves a machine profile (``/readyz``,
``/metrics``) until SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


PINS = REPO / "daemonset" / "image" / "requirements.txt"


def packaged() -> list[str]:
    """What scripts/image.sh builds topolink's wheel from, so this test builds from the same."""
    (line,) = [x for x in (REPO / "scripts" / "image.sh").read_text().splitlines() if x.startswith("PACKAGED=(")]
    return line.removeprefix("PACKAGED=(").partition(")")[0].split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TOPOLINK_", "VIRTUAL_ENV", "PYTHON")) and k != "NODE_NAME"}
    return {**env, **extra}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    for name in packaged():
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                        if (REPO / name).is_dir() else {}))
    wheels = work / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(wheels),
                            str(src)], capture_output=True, text=True, timeout=300, check=False, env=clean_env())
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("topolink-*.whl")
    env_dir = work / "venv"
    subprocess.run(["python3", "-m", "venv", str(env_dir)], check=True, timeout=120, env=clean_env())
    installed = subprocess.run([str(env_dir / "bin" / "pip"), "install", "-q", "-c", str(PINS), str(wheel)],
                               capture_output=True, text=True, timeout=600, check=False, env=clean_env(), cwd=work)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return env_dir


def test_installed_from_the_wheel_not_the_tree(venv: Path) -> None:
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import agent, exporter.kube; print(agent.__file__)"],
                         capture_output=True, text=True, check=True, cwd=venv, env=clean_env())
    assert Path(out.stdout.strip()).is_relative_to(venv)


def test_serve_help_and_discover(venv: Path) -> None:
    topolink = str(venv / "bin" / "topolink")
    help_ = subprocess.run([topolink, "serve", "--help"], capture_output=True, text=True, timeout=60, check=False,
                           cwd=venv, env=clean_env())
    assert help_.returncode == 0 and "--state-dir" in help_.stdout and "--labels-via" in help_.stdout
    found = subprocess.run([topolink, "discover", "--format", "json"], capture_output=True, text=True, timeout=120,
                           check=False, cwd=venv, env=clean_env())
    assert found.returncode in (0, 1), found.stderr  # 1: this machine leaves some facts unknown
    assert '"schema"' in found.stdout


def test_serve_a_machine_profile(venv: Path, tmp_path: Path) -> None:
    tree = subprocess.run([sys.executable, "-m", "tests.fakenvml", "tree", "tests/machines/hgx-h100.yaml",
                           str(tmp_path / "node")], capture_output=True, text=True, check=True, cwd=REPO, timeout=120)
    profile = dict(line.split("=", 1) for line in tree.stdout.splitlines())
    port = free_port()
    env = clean_env(**profile, NODE_NAME="hgx-h100-0")
    proc = subprocess.Popen([str(venv / "bin" / "topolink"), "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--state-dir", str(tmp_path / "state"), "--probe-interval", "0",
                             "--labels-via", "none", "--no-resource-slices"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        status = 0
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status, _ = get(f"http://127.0.0.1:{port}/readyz")
            except OSError:
                status = 0
            if status == 200:
                break
            time.sleep(0.2)
        assert status == 200, f"not ready: {proc.poll()}"
        status, metrics = get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        assert metrics.count("topolink_gpu_info{") == 8
        assert 'topolink_snapshot_info{node="hgx-h100-0"' in metrics
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        log = proc.communicate(timeout=10)[0]
    assert "Traceback" not in log, log[-2000:]
