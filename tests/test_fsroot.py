"""FsRoot as a jail on real trees: no hang on a FIFO, no unbounded read, no escape through links or ``..``."""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent.discovery.access import AttributeTooLarge, FsRoot, NotARegularFile
from tests.unprivileged import CANNOT_DROP, NOBODY, as_nobody


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging: a blocked open() is interrupted by the alarm."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def write(root: Path, rel: str, content: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def link(root: Path, rel: str, target: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


@pytest.fixture
def jail(tmp_path: Path) -> Path:
    """A tree below ``tmp_path/root`` with a secret beside it that no read may reach."""
    write(tmp_path, "secret", "outside the root\n")
    root = tmp_path / "root"
    write(root, "sys/devices/virtual/net/eth0/mtu", "1500\n")
    link(root, "sys/class/net/eth0", "../../devices/virtual/net/eth0")  # relative, as sysfs writes it
    link(root, "sys/bus/net/eth0", "/sys/class/net/eth0")  # absolute, as some gathered trees have it
    return root


# The live root and a jail read the same tree: the live one through its absolute path.
Open = Callable[[Path], tuple[FsRoot, str]]
MODES: dict[str, Open] = {
    "jail": lambda root: (FsRoot(root), ""),
    "live": lambda root: (FsRoot(), str(root)),
}


@pytest.mark.parametrize("mode", MODES)
def test_a_fifo_is_refused_at_once_instead_of_blocking(mode: str, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "vendor")
    (tmp_path / "vendor_link").symlink_to("vendor")
    fs, at = MODES[mode](tmp_path)
    with deadline(5):
        for name in ("vendor", "vendor_link"):
            with pytest.raises(NotARegularFile, match=r"not a regular file \(fifo\)"):
                fs.attr(at, name)
            with pytest.raises(NotARegularFile):
                fs.read_bytes(at, name)


@pytest.mark.parametrize("mode", MODES)
def test_a_directory_is_not_an_attribute(mode: str, tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    fs, at = MODES[mode](tmp_path)
    with pytest.raises(NotARegularFile, match="directory") as caught:
        fs.attr(at, "dir")
    assert isinstance(caught.value, OSError)


@pytest.mark.parametrize("mode", MODES)
def test_an_attribute_over_64_kib_is_refused_but_config_reads_stay_bounded(mode: str, tmp_path: Path) -> None:
    write(tmp_path, "huge", b"x" * 10_000_000)
    write(tmp_path, "full", b"y" * 65536)
    fs, at = MODES[mode](tmp_path)
    with pytest.raises(AttributeTooLarge, match="65536 bytes"):
        fs.attr(at, "huge")
    assert fs.attr(at, "full") == "y" * 65536
    assert fs.read_bytes(at, "huge", limit=4096) == b"x" * 4096


def test_real_sysfs_attributes_still_read() -> None:
    fs = FsRoot()
    first = fs.listdir("/sys/bus/pci/devices")[0]
    assert re.fullmatch(r"0x[0-9a-f]{4}", fs.attr("/sys/bus/pci/devices", first, "vendor") or "")
    config = fs.read_bytes("/sys/bus/pci/devices", first, "config", limit=64)
    assert config is not None and len(config) == 64
    assert fs.is_dir("/sys/bus/pci/devices", first) and fs.exists("/proc/self/status")
    assert fs.realpath("/sys/bus/pci/devices", first).startswith("/sys/devices/")


def test_an_absolute_link_to_a_host_file_reads_the_trees_own_file_or_nothing(jail: Path) -> None:
    link(jail, "sys/status", "/proc/self/status")
    link(jail, "sys/hostname", "/etc/hostname")
    fs = FsRoot(jail)
    assert fs.attr("sys/status") is None
    assert fs.attr("sys/hostname") is None
    write(jail, "etc/hostname", "fixture-host\n")
    assert fs.attr("sys/hostname") == "fixture-host"
    assert fs.realpath("sys/hostname") == "/etc/hostname"


def test_an_absolute_link_to_the_roots_own_path_on_the_host_stays_inside(jail: Path) -> None:
    link(jail, "sys/leak", str(jail.parent / "secret"))  # the host path of the secret, taken below the root
    fs = FsRoot(jail)
    assert fs.attr("sys/leak") is None
    assert not fs.is_dir("sys/leak")
    assert fs.realpath("sys/leak") == str(jail.parent / "secret")


def test_dotdot_stops_at_the_root(jail: Path) -> None:
    link(jail, "sys/up", "../../../../secret")
    link(jail, "sys/updir", "../../../..")
    fs = FsRoot(jail)
    assert fs.attr("../secret") is None
    assert fs.attr("/sys/../../../secret") is None
    assert fs.attr("sys/up") is None
    assert fs.listdir("..") == ["sys"]
    assert fs.listdir("sys/updir") == ["sys"]
    assert fs.realpath("sys/updir") == "/"
    assert fs.attr("sys/updir/sys/class/net/eth0/mtu") == "1500"
    assert not fs.exists("../secret")
    assert fs.readlink("../root/sys/up") is None


def test_a_symlink_loop_fails_fast_with_eloop(jail: Path) -> None:
    link(jail, "sys/a", "b")
    link(jail, "sys/b", "/sys/a")
    link(jail, "sys/self", "self")
    fs = FsRoot(jail)
    started = time.monotonic()
    with deadline(5):
        for call in (fs.attr, fs.listdir, fs.is_dir, fs.realpath, fs.read_bytes):
            for name in ("sys/a", "sys/self", "sys/a/x"):
                with pytest.raises(OSError) as caught:
                    call(name)
                assert caught.value.errno == errno.ELOOP, (call, name)
    assert time.monotonic() - started < 1
    assert fs.exists("sys/a") and fs.readlink("sys/a") == "b"  # the link itself is still there


def test_forty_links_resolve_and_the_forty_first_is_a_loop(tmp_path: Path) -> None:
    write(tmp_path, "end", "reached\n")
    link(tmp_path, "l40", "end")
    for i in range(40):
        link(tmp_path, f"l{i}", f"/l{i + 1}" if i % 2 else f"l{i + 1}")
    fs = FsRoot(tmp_path)
    assert fs.attr("l1") == "reached"
    with pytest.raises(OSError) as caught:
        fs.attr("l0")
    assert caught.value.errno == errno.ELOOP


def test_link_chains_resolve_inside_the_root(jail: Path) -> None:
    link(jail, "sys/chain/first", "/sys/bus/net/eth0")  # absolute -> absolute -> relative
    fs = FsRoot(jail)
    for entry in ("sys/class/net/eth0", "sys/bus/net/eth0", "sys/chain/first"):
        assert fs.attr(entry, "mtu") == "1500", entry
        assert fs.realpath(entry) == "/sys/devices/virtual/net/eth0"
        assert fs.is_dir(entry)
    assert fs.readlink("sys/bus/net/eth0") == "/sys/class/net/eth0"
    assert fs.readlink_name("sys/class/net/eth0") == "eth0"
    assert fs.readlink("sys/devices") is None  # a directory, not a link
    assert fs.realpath("sys/bus/net/eth0/mtu") == "/sys/devices/virtual/net/eth0/mtu"
    assert fs.realpath("sys/class/net/eth0/..") == "/sys/devices/virtual/net"


def test_listdir_through_an_absolutely_linked_directory(jail: Path) -> None:
    link(jail, "sys/bus/net/devices", "/sys/class/net")
    fs = FsRoot(jail)
    assert fs.listdir("/sys/bus/net/devices") == ["eth0"]
    assert fs.listdir("/sys/bus/net/devices/eth0") == ["mtu"]
    assert fs.listdir("/sys/bus/net/devices/eth0/mtu") == []  # a file
    assert fs.listdir("/sys/bus/net/devices/absent") == []


def test_a_dangling_link_exists_but_is_no_directory(jail: Path) -> None:
    link(jail, "sys/class/net/gone", "../../devices/virtual/net/gone")
    link(jail, "sys/class/net/gone_abs", "/sys/devices/virtual/net/gone")
    fs = FsRoot(jail)
    for name in ("gone", "gone_abs"):
        entry = f"sys/class/net/{name}"
        assert fs.exists(entry)
        assert not fs.is_dir(entry)
        assert fs.attr(entry, "mtu") is None
        assert fs.listdir(entry) == []
        assert fs.realpath(entry) == "/sys/devices/virtual/net/gone"
        assert fs.readlink_name(entry) == "gone"
    assert not fs.exists("sys/class/net/absent") and not fs.is_dir("sys/class/net/absent")
    assert fs.attr("sys/devices/virtual/net/eth0/mtu/below_a_file") is None


def test_the_directory_cache_sees_the_same_tree_as_a_fresh_root(jail: Path) -> None:
    fs = FsRoot(jail)
    first = [fs.attr("sys/bus/net/eth0/mtu"), fs.realpath("sys/bus/net/eth0"), fs.listdir("sys/class/net/eth0")]
    again = [fs.attr("sys/bus/net/eth0/mtu"), fs.realpath("sys/bus/net/eth0"), fs.listdir("sys/class/net/eth0")]
    assert first == again == ["1500", "/sys/devices/virtual/net/eth0", ["mtu"]]
    assert fs == FsRoot(jail) and not fs.is_live and FsRoot().is_live




def _outcome(read: Callable[..., object], *args: object, **kwargs: object) -> object:
    try:
        return read(*args, **kwargs)
    except OSError as exc:
        return (type(exc), exc.errno, exc.filename)


@pytest.mark.parametrize("mode", MODES)
def test_a_directory_reads_each_entry_as_attr_and_read_bytes_do(mode: str, jail: Path) -> None:
    base = jail / "sys/devices/pci0000:00/0000:00:01.0"
    write(base, "vendor", "0x10de\n")
    write(base, "huge", b"x" * 100_000)
    write(base, "empty", b"")
    write(jail, "etc/hostname", "fixture-host\n")
    os.mkfifo(base / "fifo")
    (base / "subdir").mkdir()
    link(base, "rel", "vendor")
    link(base, "abs", "/etc/hostname")  # the tree's own file in a jail, the host's on the live root
    link(base, "gone", "vendor.gone")
    link(base, "loop", "loop")
    link(jail, "sys/bus/pci/devices/0000:00:01.0", "../../../devices/pci0000:00/0000:00:01.0")
    fs, at = MODES[mode](jail)
    path = f"{at}/sys/bus/pci/devices/0000:00:01.0"
    directory = fs.directory(path)
    names = directory.names()
    assert names == frozenset(fs.listdir(path))
    with deadline(5):
        for name in [*sorted(names), "absent"]:
            assert _outcome(directory.attr, name) == _outcome(fs.attr, path, name), name
            for limit in (1, 4096):
                assert (_outcome(directory.read_bytes, name, limit)
                        == _outcome(fs.read_bytes, path, name, limit=limit)), name
    assert directory.attr("vendor") == directory.attr("rel") == "0x10de"
    assert directory.attr("gone") is None
    if mode == "jail":
        assert directory.attr("abs") == "fixture-host"


def test_a_directory_that_is_none_reads_as_the_root_does(jail: Path) -> None:
    link(jail, "sys/a", "b")
    link(jail, "sys/b", "/sys/a")
    link(jail, "sys/gone", "nowhere")
    fs = FsRoot(jail)
    for path in ("sys/absent", "sys/gone", "sys/devices/virtual/net/eth0/mtu", "sys/absent/below"):
        assert not fs.is_dir(path) and fs.directory(path).names() is None, path
        assert fs.directory(path).attr("mtu") is None and fs.directory(path).read_bytes("mtu", 1) is None
    for call in (fs.directory("sys/a").names, lambda: fs.directory("sys/a").attr("mtu")):
        with pytest.raises(OSError) as caught:
            call()
        assert caught.value.errno == errno.ELOOP
    directory = fs.directory("/sys/bus/net/eth0")  # absolute -> relative links, resolved inside the root
    assert directory.names() == {"mtu"} and directory.attr("mtu") == "1500"


@pytest.mark.parametrize("mode", MODES)
def test_a_plain_directory_is_a_directory_and_no_link(mode: str, jail: Path) -> None:
    link(jail, "sys/loop", "loop")
    link(jail, "sys/up", "../../../..")
    fs, at = MODES[mode](jail)
    for path, plain in (("sys/devices/virtual/net/eth0", True), ("sys/class/net/eth0", False),
                        ("sys/devices/virtual/net/eth0/mtu", False), ("sys/absent", False),
                        ("sys/loop", False), ("sys/up", False)):
        full = f"{at}/{path}"
        try:  # what the sources asked before, where an error means "not the device's directory"
            expected = fs.is_dir(full) and fs.readlink(full) is None
        except OSError:
            expected = False
        assert fs.is_plain_dir(full) == expected == plain, path
    trailing = f"{at}/sys/class/net/eth0/"  # the live kernel follows a link named with a trailing slash
    assert fs.is_plain_dir(trailing) == (fs.is_dir(trailing) and fs.readlink(trailing) is None)


def test_permission_denied_propagates(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)  # nobody may enter the tree, but not read the file
    write(tmp_path, "sys/secret", "root only\n").chmod(0o600)

    def check() -> None:
        for fs, name in ((FsRoot(Path(".")), "sys/secret"), (FsRoot(), "/proc/self/cwd/sys/secret")):
            with pytest.raises(PermissionError):
                fs.attr(name)
        assert FsRoot(Path(".")).listdir("sys") == ["secret"]

    status = as_nobody(check, tmp_path)
    if status == CANNOT_DROP:
        pytest.skip(f"cannot drop privileges to uid {NOBODY} here")
    assert status == 0
