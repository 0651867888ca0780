"""``topolink probe`` and ``topolink selftest`` as a user runs them: outputs, files and exit statuses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import topology as t
from agent.cli import main
from agent.cli.probe import EXIT_NONE_RAN, EXIT_OK, EXIT_USAGE, ProgressBar, selftest_rows
from agent.discovery import DiscoveryContext, discover
from probes import SelftestLine
from tests.probe_snapshots import four_gpu_box
from topology import replace


@pytest.fixture
def host_file(tmp_path: Path) -> Path:
    """This machine, as discovery sees it: what ``probe --from`` accepts."""
    path = tmp_path / "snap.json"
    path.write_text(t.dumps(discover(DiscoveryContext())))
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


@pytest.mark.slow
def test_json_on_stdout_and_a_line_per_test_on_stderr(host_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["probe", "--from", str(host_file), "--backend", "cpu", "--tests", "host_memcpy", "--format", "json"])
    assert code == EXIT_OK
    captured = capsys.readouterr()
    assert json.loads(captured.out)["schema"] == "topolink.probe/v2"  # nothing else on standard output
    progress = [ln for ln in captured.err.splitlines() if ln.startswith("topolink probe: [")]
    assert progress and progress[0].startswith("topolink probe: [1/") and "host_memcpy[" in progress[0]


def test_unknown_test_is_a_usage_error(host_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--from", str(host_file), "--backend", "cpu", "--tests", "nope"]) == EXIT_USAGE
    assert "unknown test(s) for the cpu backend: nope" in capsys.readouterr().err


@pytest.mark.slow
def test_no_test_could_run_is_non_zero(host_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if discover(DiscoveryContext()).gpus:
        pytest.skip("this machine has GPUs: the cuda tests could run")
    assert main(["probe", "--from", str(host_file), "--backend", "cuda"]) == EXIT_NONE_RAN
    captured = capsys.readouterr()  # one line naming the missing GPU, not the missing CuPy
    assert captured.out == "" and "no test could run: No NVIDIA GPU found" in captured.err
    assert "CuPy" not in captured.err


def _saved(tmp_path: Path, snap: t.Snapshot) -> str:
    path = tmp_path / "other.json"
    path.write_text(t.dumps(snap))
    return str(path)


def test_another_machines_snapshot_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its numbers would be this host's copies filed under the other node's NUMA nodes and GPUs."""
    here = discover(DiscoveryContext())
    others = {
        "another node": replace(here, node=here.node + "-elsewhere"),
        "other CPUs in a NUMA node": replace(here, numa_nodes=(
            replace(here.numa_nodes[0], cpus=(*here.numa_nodes[0].cpus, 1000)), *here.numa_nodes[1:])),
        "other GPUs": replace(four_gpu_box(), node=here.node),  # with the NUMA nodes its GPUs name
    }
    for what, snap in others.items():
        code = main(["probe", "--from", _saved(tmp_path, snap), "--backend", "cpu", "--tests", "host_memcpy"])
        err = capsys.readouterr().err
        assert code == EXIT_USAGE and "does not describe this machine" in err, (what, err)


def test_list_names_every_test(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--list"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "cuda  device_to_device_memcpy_read_ce" in out and "cpu   host_memcpy" in out
    assert "all_to_host_memcpy_ce" in out and "alltoall" in out and "host_bidirectional_memcpy" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("cuda  device_to_device_memcpy_write_ce "))
    assert line.split()[2] == "quick"  # the quick profile runs it
    line = next(ln for ln in out.splitlines() if ln.startswith("cuda  gdr_write_bw "))
    assert line.split()[2] != "quick"
    for name in ("all_to_one_read_ce", "one_to_all_write_sm", "host_to_device_bidirectional_memcpy_sm",
                 "host_to_all_bidirectional_memcpy_sm"):  # the full profile's only
        line = next(ln for ln in out.splitlines() if ln.startswith(f"cuda  {name} "))
        assert line.split()[2] != "quick", line


@pytest.mark.slow
def test_selftest_gpu_without_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["selftest", "--gpu"]) == EXIT_NONE_RAN
    out = capsys.readouterr().out
    # every test skipped for one reason: one row that counts them and says why (probe --list names them)
    (row,) = [line for line in out.splitlines() if line.startswith("SKIP")]
    assert re.match(r"SKIP all \d+ tests +CuPy is not installed", row), out


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
        lines = ProgressBar(plain)
        lines(0, 2, "host_memcpy[numa0,numa0]")
        lines(1, 2, "all_reduce[numa0,numa0]")
        lines(2, 2, "")
        lines.finish()
    assert (tmp_path / "log").read_text() == (
        "topolink probe: [1/2] host_memcpy[numa0,numa0]\ntopolink probe: [2/2] all_reduce[numa0,numa0]\n")


def test_selftest_says_each_skip_reason_once() -> None:
    """40 CUDA tests skipped for want of CuPy are one row; another reason is its own row, where it first came;
    passes and failures stay one row per test."""
    no_cupy, no_peer = "CuPy is not installed", "no peer access"
    lines = [SelftestLine(f"t{i}", "SKIP", no_cupy) for i in range(40)]
    assert selftest_rows(lines) == [("SKIP", "all 40 tests", no_cupy)]
    mixed = [SelftestLine("a", "PASS", "1 run(s)"), SelftestLine("b", "SKIP", no_peer),
             SelftestLine("c", "SKIP", no_cupy), SelftestLine("d", "FAIL", "wrong"), SelftestLine("e", "SKIP", no_peer)]
    assert selftest_rows(mixed) == [("PASS", "a", "1 run(s)"), ("SKIP", "2 tests", no_peer), ("SKIP", "c", no_cupy),
                                    ("FAIL", "d", "wrong")]
