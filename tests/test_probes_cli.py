"""``topolink probe`` and ``topolink selftest`` as a user runs them: outputs, files and exit statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import topology as t
from agent.cli import main
from agent.cli.probe import EXIT_NONE_RAN, EXIT_OK, EXIT_USAGE, ProgressBar
from tests.probe_snapshots import four_gpu_box, this_host


@pytest.fixture
def host_file(tmp_path: Path) -> Path:
    path = tmp_path / "snap.json"
    path.write_text(t.dumps(this_host()))
    return path


@pytest.mark.slow
def test_probe_json_to_a_file(host_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "probe.json"
    code = main(["probe", "--from", str(host_file), "--backend", "cpu", "--tests", "host_memcpy",
                 "--format", "json", "-o", str(out)])
    assert code == EXIT_OK
    doc = json.loads(out.read_text())
    (outcome,) = doc["outcomes"]
    assert outcome["status"] == "ok" and outcome["measurements"][0]["stats"]["median"] > 0
    snap = t.from_dict(doc["snapshot"])
    assert [m.test for m in snap.measurements] == ["host_memcpy"]


def test_unknown_test_is_a_usage_error(host_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--from", str(host_file), "--backend", "cpu", "--tests", "nope"]) == EXIT_USAGE
    assert "unknown test(s) for the cpu backend: nope" in capsys.readouterr().err


@pytest.mark.slow
def test_no_test_could_run_is_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "box.json"
    path.write_text(t.dumps(four_gpu_box()))
    assert main(["probe", "--from", str(path), "--backend", "cuda"]) == EXIT_NONE_RAN
    captured = capsys.readouterr()
    assert "WAIVED" in captured.out and "no test could run" in captured.err


def test_list_names_every_test(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--list"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "cuda  device_to_device_memcpy_read_ce" in out and "cpu   host_memcpy" in out
    assert "all_to_host_memcpy_ce" in out and "alltoall" in out and "host_bidirectional_memcpy" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("cuda  device_to_device_memcpy_write_ce "))
    assert line.split()[2] == "quick"  # the quick profile runs it
    line = next(ln for ln in out.splitlines() if ln.startswith("cuda  gdr_write_bw "))
    assert line.split()[2] != "quick"


@pytest.mark.slow
def test_selftest_gpu_without_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["selftest", "--gpu"]) == EXIT_NONE_RAN
    out = capsys.readouterr().out
    assert "SKIP host_to_device_memcpy_ce" in out


def test_progress_bar_draws_only_on_a_terminal(tmp_path: Path) -> None:
    class Tty:
        def __init__(self) -> None:
            self.text = ""

        def isatty(self) -> bool:
            return True

        def write(self, s: str) -> None:
            self.text += s

        def flush(self) -> None:
            pass

    tty = Tty()
    bar = ProgressBar(tty, width=10)  # type: ignore[arg-type]
    bar(1, 4, "host_memcpy[numa0,numa0]")
    bar.finish()
    assert tty.text.startswith("\r[##........] 1/4 host_memcpy[numa0,numa0]") and tty.text.endswith("\n")
    with (tmp_path / "log").open("w") as plain:
        quiet = ProgressBar(plain)
        quiet(1, 1, "x")
        quiet.finish()
    assert (tmp_path / "log").read_text() == ""
