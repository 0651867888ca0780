"""Which writes are flushed to the disk before their rename: the agent's state directory and the NFD features
file (read by other processes after a restart or a reboot) are; the command line's ``-o`` is not, as a
shell's redirection, ``cp`` and lstopo are not. Every ``os.fsync`` of the process is counted by a wrapper
that still flushes, and each flushed descriptor is named by /proc."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.cli import main
from agent.serve._state import StateDir
from exporter import Target, write_file
from exporter.kube import FeatureFileSink, LabelConfig
from topology import Snapshot, loads


@pytest.fixture
def flushed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The path of every file descriptor ``os.fsync`` is called on while the test runs."""
    paths: list[str] = []
    real: Callable[[int], None] = os.fsync

    def counting(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    yield paths


def beside(paths: list[str], target: Path) -> list[str]:
    """Those of ``paths`` that are a temporary file beside ``target`` (the one renamed over it)."""
    return [p for p in paths if Path(p).parent == target.parent and Path(p).name.startswith(f".{target.name}.")]


def test_discover_writes_its_output_file_without_flushing_it(tmp_path: Path, flushed: list[str]) -> None:
    out = tmp_path / "node.json"
    out.write_text("old\n")
    out.chmod(0o640)
    try:
        code = main(["discover", "--format", "json", "-o", str(out)])
    except SystemExit as exc:
        code = exc.code  # type: ignore[assignment]
    assert code == 0
    assert loads(out.read_text()).numa_nodes  # the whole new snapshot, renamed over the old file
    assert oct(out.stat().st_mode & 0o777) == oct(0o640) and os.listdir(tmp_path) == ["node.json"]
    assert flushed == []


def test_the_state_directory_is_flushed_before_each_rename(tmp_path: Path, flushed: list[str]) -> None:
    state = StateDir(tmp_path / "state")
    state.save_snapshot(Snapshot(node="n"))
    state.save_report(json.dumps({"schema": "topolink.probe/v2"}))
    assert len(flushed) == 2
    assert len(beside(flushed, tmp_path / "state" / "snapshot.json")) == 1
    assert len(beside(flushed, tmp_path / "state" / "probe-report.json")) == 1
    assert sorted(os.listdir(tmp_path / "state")) == ["probe-report.json", "snapshot.json"]


def test_the_features_file_is_flushed_before_its_rename(tmp_path: Path, flushed: list[str]) -> None:
    path = tmp_path / "features.d" / "topolink"
    result = FeatureFileSink(path, LabelConfig()).publish(Snapshot(node="n"))
    assert result.ok and result.written == 1
    assert len(flushed) == 1 and beside(flushed, path) == flushed
    assert os.listdir(path.parent) == ["topolink"]


@pytest.mark.parametrize("durable", [True, False])
def test_the_caller_chooses(tmp_path: Path, flushed: list[str], durable: bool) -> None:
    """Both ways the file is replaced atomically alike: only the flush differs."""
    one, two = tmp_path / "one", tmp_path / "two"
    write_file(str(one), b"first\n", durable=durable)
    target = Target(str(two), durable=durable)
    target.write(b"second\n")
    target.close()
    assert (one.read_bytes(), two.read_bytes()) == (b"first\n", b"second\n")
    assert sorted(os.listdir(tmp_path)) == ["one", "two"]
    assert len(flushed) == (2 if durable else 0)
