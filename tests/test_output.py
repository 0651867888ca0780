"""``-o FILE``: checked before any work, replaced atomically, never leaving a temporary file behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agent.cli._output import OutputError, check_output, write_output
from tests.unprivileged import CANNOT_DROP, NOBODY, as_nobody
from topology import TopolinkError


def test_stdout_needs_no_check(capsys: pytest.CaptureFixture[str]) -> None:
    check_output(None)
    check_output("-")
    write_output("to stdout\n", "-")
    assert capsys.readouterr().out == "to stdout\n"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="is a directory") as caught:
        check_output(str(tmp_path))
    assert isinstance(caught.value, TopolinkError)


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=r"-o .*/missing/out.json: no such directory"):
        check_output(str(tmp_path / "missing/out.json"))


def test_a_file_as_parent_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is not a directory"):
        check_output(str(tmp_path / "file/out.json"))


def test_an_unwritable_directory_or_file_is_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)  # root's: nobody may enter but not create
    (tmp_path / "open").mkdir(mode=0o777)
    (tmp_path / "open").chmod(0o777)
    (tmp_path / "open/readonly.json").write_text("{}\n")
    (tmp_path / "open/readonly.json").chmod(0o444)

    def check() -> None:
        for output in ("out.json", "open/readonly.json"):
            with pytest.raises(OutputError, match="not writable"):
                check_output(output)
        check_output("open/new.json")

    status = as_nobody(check, tmp_path)
    if status == CANNOT_DROP:
        pytest.skip(f"cannot drop privileges to uid {NOBODY} here")
    assert status == 0


def test_write_replaces_the_file_with_the_usual_mode(tmp_path: Path) -> None:
    out = tmp_path / "topology.json"
    check_output(str(out))
    write_output("first\n", str(out))
    write_output("second\n", str(out))
    assert out.read_text() == "second\n"
    assert os.listdir(tmp_path) == ["topology.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


def test_a_relative_name_writes_in_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    check_output("out.txt")
    write_output("here\n", "out.txt")
    assert (tmp_path / "out.txt").read_text() == "here\n"


def test_a_directory_in_the_way_is_left_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    (target / "inside").mkdir(parents=True)
    with pytest.raises(OutputError, match=r"-o .*taken is a directory"):
        write_output("text\n", str(target))
    assert os.listdir(tmp_path) == ["taken"]
    assert os.listdir(target) == ["inside"]


def test_a_failed_write_keeps_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("old\n")
    with pytest.raises(UnicodeEncodeError):
        write_output("\udc80", str(out))  # a lone surrogate cannot be encoded
    assert out.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.json"]


def test_a_missing_directory_fails_the_write_too(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=r"no such directory .*missing"):
        write_output("text\n", str(tmp_path / "missing/out.json"))
    assert os.listdir(tmp_path) == []
