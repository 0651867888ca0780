"""No command replaces a file it did not create: ``-o``, the state directory and the features file against
every kind of path. Device nodes are made in a temporary directory (``mknod`` needs root; without it the
device cases run on a FIFO, which is what a non-root user can make), never the machine's own /dev/null."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli._output import OutputError, check_output, write_output
from agent.serve._state import StateDir
from exporter import Target, UnsafeFile, read_regular
from exporter.kube import FeatureFileSink, LabelConfig
from topology import Snapshot

REPO = Path(__file__).resolve().parents[1]
ROOT = os.geteuid() == 0


def char_device(path: Path) -> Path:
    """A character device like /dev/null (1, 3), in a temporary directory."""
    if not ROOT:
        pytest.skip("mknod needs root: the character device case runs as root (CI does)")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return path


def kind(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return stat.S_IFMT(st.st_mode), st.st_rdev


def test_a_character_device_is_written_through_never_replaced(tmp_path: Path) -> None:
    dev = char_device(tmp_path / "null")
    before = kind(dev)
    check_output(str(dev))
    write_output("a snapshot\n", str(dev))
    assert kind(dev) == before and os.listdir(tmp_path) == ["null"]


def test_a_link_to_a_device_writes_the_device(tmp_path: Path) -> None:
    dev = char_device(tmp_path / "null")
    (tmp_path / "out").symlink_to("null")
    write_output("x\n", str(tmp_path / "out"))
    assert kind(dev)[0] == stat.S_IFCHR and os.readlink(tmp_path / "out") == "null"


def test_a_block_device_is_refused(tmp_path: Path) -> None:
    if not ROOT:
        pytest.skip("mknod needs root: the block device case runs as root (CI does)")
    blk = tmp_path / "disk"
    os.mknod(blk, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    with pytest.raises(OutputError, match="block device"):
        check_output(str(blk))
    assert stat.S_ISBLK(os.lstat(blk).st_mode) and os.listdir(tmp_path) == ["disk"]


def test_a_fifo_with_a_reader_gets_the_text(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    end = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the reader is there first, as `cat fifo &` would be
    try:
        check_output(str(fifo))
        write_output("through the pipe\n", str(fifo))
        assert os.read(end, 100) == b"through the pipe\n"
    finally:
        os.close(end)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["fifo"]


def test_a_fifo_nobody_reads_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="FIFO nobody reads"):
        check_output(str(fifo))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["fifo"]


def test_a_link_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("old\n")
    (tmp_path / "real.json").chmod(0o640)
    (tmp_path / "link.json").symlink_to("real.json")
    (tmp_path / "dangling.json").symlink_to("created.json")
    write_output("new\n", str(tmp_path / "link.json"))
    write_output("made\n", str(tmp_path / "dangling.json"))
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "dangling.json").is_symlink()
    assert (tmp_path / "real.json").read_text() == "new\n" and (tmp_path / "created.json").read_text() == "made\n"
    assert stat.S_IMODE((tmp_path / "real.json").stat().st_mode) == 0o640  # the replaced file's mode is kept
    assert sorted(os.listdir(tmp_path)) == ["created.json", "dangling.json", "link.json", "real.json"]


def test_a_replaced_file_keeps_its_owner(tmp_path: Path) -> None:
    if not ROOT:
        pytest.skip("only root can give a file to another user: the owner case runs as root (CI does)")
    out = tmp_path / "out.json"
    out.write_text("old\n")
    os.chown(out, 65534, 65534)
    write_output("new\n", str(out))
    assert (out.stat().st_uid, out.stat().st_gid) == (65534, 65534)


def test_a_loop_of_links_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OutputError, match=r"-o .*a"):
        check_output(str(tmp_path / "a"))
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()


def test_a_path_that_turns_into_a_fifo_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    target = Target(str(out), durable=False)  # decided: a new path
    os.mkfifo(out)  # something else took the name before the write
    with pytest.raises(UnsafeFile, match="appeared"):
        target.write(b"x\n")
    assert stat.S_ISFIFO(os.lstat(out).st_mode) and os.listdir(tmp_path) == ["out.json"]


def test_reading_only_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        with pytest.raises(UnsafeFile, match="not a regular file"):
            read_regular(str(path), 100)
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(UnsafeFile, match="101 bytes"):
        read_regular(str(tmp_path / "big"), 100)
    assert read_regular(str(tmp_path / "big"), 101) == b"x" * 101


@pytest.mark.parametrize("make", ["fifo", "dir", "dev"])
def test_the_state_directory_neither_reads_nor_replaces_what_is_not_its_file(tmp_path: Path, make: str) -> None:
    path = tmp_path / "snapshot.json"
    if make == "fifo":
        os.mkfifo(path)
    elif make == "dir":
        path.mkdir()
    else:
        char_device(path)
    before = kind(path)
    state = StateDir(tmp_path)
    loaded = state.load("0" * 64)  # a FIFO must not hang the agent's start
    assert loaded.snapshot is None and [f for f, _ in loaded.errors] == ["snapshot.json"]
    if make == "dev":
        state.save_snapshot(Snapshot(node="n"))  # written through, as -o does
    else:
        with pytest.raises(OSError):
            state.save_snapshot(Snapshot(node="n"))
    assert kind(path) == before and os.listdir(tmp_path) == ["snapshot.json"]


def test_the_features_file_is_never_waited_on_nor_replaced_when_it_is_a_fifo(tmp_path: Path) -> None:
    path = tmp_path / "topolink"
    os.mkfifo(path)
    result = FeatureFileSink(path, LabelConfig()).publish(Snapshot(node="n"))
    assert not result.ok and "FIFO" in result.detail
    assert stat.S_ISFIFO(os.lstat(path).st_mode) and os.listdir(tmp_path) == ["topolink"]


def test_discover_to_a_device_as_the_benchmark_does(tmp_path: Path) -> None:
    """``benchmarks/startup.py`` runs ``discover -o /dev/null``; here on a device node of our own."""
    dev = char_device(tmp_path / "null")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")}
    run = subprocess.run([sys.executable, "-m", "agent.cli", "discover", "--format", "json", "-o", str(dev),
                          "--sysfs-root", str(tmp_path)], capture_output=True, text=True, cwd=REPO, env=env,
                         timeout=120, check=False)
    assert run.returncode in (0, 1), run.stderr
    assert stat.S_ISCHR(os.lstat(dev).st_mode) and os.listdir(tmp_path) == ["null"]
