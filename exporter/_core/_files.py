"""Files topolink writes and reads back: ``-o``, the agent's state directory, the NFD features file.

  Invariant: no command replaces a file it did not create. A file is replaced atomically (a temporary file
  beside it, then a rename) only when the path is new or names a regular file, whose mode (and owner,
  where allowed) the new one keeps; a symbolic link is followed to its target, and the target obeys the
  same rules. Nothing is ever renamed over a device, a FIFO, a socket or a directory: a character device
  or a FIFO with a reader is written through (opened for writing, never truncated: ``-o /dev/null``, a
  terminal, a pipe); a FIFO without a reader, a block device (a disk) and anything else are refused with a
  reason, before any work.

  Durability is the caller's choice (``durable``): the agent's state directory and the NFD features file are
  read by other processes across restarts and reboots, so their content is flushed to the disk (``fsync``)
  before the rename; the command line's ``-o`` is replaced atomically but not flushed, as a shell's
  redirection, ``cp`` and lstopo write theirs: while the machine runs a reader sees the old file or the new
  one, and only a crash of the machine itself (not of topolink) before the kernel writes it back may leave
  the file empty or short, as it may theirs.

  Reading is as strict: only a regular file is read (opened without blocking, checked with ``fstat``, so a
  FIFO cannot hang a command), and never more than a stated size.

Imported by the exporter's features file sink and by the agent (the command line's ``-o`` and ``--from``,
the state directory); nothing here imports anything of topolink's but its error base.
"""

from __future__ import annotations

import errno
import os
import stat

from topology import TopolinkError

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class UnsafeFile(TopolinkError):
    """A path topolink refuses to write or read, and why (one line)."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: str, limit: int) -> bytes:
    """The content of the regular file ``path`` (links followed), at most ``limit`` bytes; UnsafeFile for a
    FIFO, device, directory or socket and for a bigger file, OSError when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{path}: {_kind(st.st_mode)}, not a regular file: not read")
        if st.st_size > limit:
            raise UnsafeFile(f"{path}: {st.st_size} bytes, larger than the {limit} bytes allowed: not read")
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:  # it grew while read (a file in /proc says size 0)
            raise UnsafeFile(f"{path}: larger than the {limit} bytes allowed: not read")
        return data
    finally:
        os.close(fd)


def _followed(path: str) -> str:
    """Where ``path`` leads when it is a symbolic link (the file replaced is the link's target, the link
    stays); else ``path`` as given, so a relative one needs no search of the directories above."""
    return os.path.realpath(path) if os.path.islink(path) else path


class Target:
    """Where one file's content goes, decided (and for a device or FIFO, opened) before any work, so a
    command that cannot write its output fails before it measures anything. ``write`` once, then it is done.
    ``durable``: a replaced file's content is flushed to the disk before the rename (see the module's text)."""

    def __init__(self, path: str, *, durable: bool) -> None:
        self.path = path
        self.durable = durable
        self._fd: int | None = None
        self._real: str | None = None  # the regular file (or new path) to replace, links followed
        self._keep: os.stat_result | None = None  # the file being replaced: its mode and owner are kept
        try:
            st: os.stat_result | None = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            st = None  # new, or a parent that is no directory (said by _new)
        except OSError as exc:  # a loop of links, a component that is no directory, EACCES
            raise UnsafeFile(f"{path}: {exc.strerror or exc}") from exc
        if st is None:
            self._new(path)
        elif stat.S_ISREG(st.st_mode):
            self._regular(path, st)
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            self._through(path)
        else:
            raise UnsafeFile(f"{path} is {_kind(st.st_mode)}: refusing to write it (only a new path, a regular "
                             "file, a character device or a FIFO with a reader)")

    def _new(self, path: str) -> None:
        real = _followed(path)  # a dangling link: the file is created where it points
        parent = os.path.dirname(real) or "."
        try:
            pst = os.stat(parent)
        except OSError as exc:
            raise UnsafeFile(f"{path}: no such directory {parent}" if isinstance(exc, FileNotFoundError)
                             else f"{path}: {parent}: {exc.strerror or exc}") from exc
        if not stat.S_ISDIR(pst.st_mode):
            raise UnsafeFile(f"{path}: {parent} is not a directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise UnsafeFile(f"{path}: not writable ({parent})")
        self._real = real

    def _regular(self, path: str, st: os.stat_result) -> None:
        real = _followed(path)
        parent = os.path.dirname(real) or "."
        if not os.access(real, os.W_OK) or not os.access(parent, os.W_OK | os.X_OK):
            raise UnsafeFile(f"{path}: not writable")
        self._real, self._keep = real, st

    def _through(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | _CLOEXEC)
        except OSError as exc:
            why = "a FIFO nobody reads" if exc.errno == errno.ENXIO else (exc.strerror or str(exc))
            raise UnsafeFile(f"{path}: {why}: not written") from exc
        st = os.fstat(fd)
        if not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):  # swapped since it was looked at
            os.close(fd)
            raise UnsafeFile(f"{path}: {_kind(st.st_mode)} now: not written")
        os.set_blocking(fd, True)  # a reader that is slow is waited for, as a shell's redirection does
        self._fd = fd

    def write(self, data: bytes) -> None:
        try:
            if self._fd is not None:
                self._write_through(self._fd, data)
            else:
                self._replace(data)
        except OSError as exc:
            raise UnsafeFile(f"{self.path}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        if self._fd is not None:
            try:  # noqa: SIM105 -- here and below not contextlib.suppress: -o loads no module it can do without
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def _write_through(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        self.close()

    def _replace(self, data: bytes) -> None:
        real = self._real
        assert real is not None
        parent, name = os.path.split(real)
        fd, tmp = _new_private_file(parent or ".", name)
        try:
            with os.fdopen(fd, "wb") as f:
                self._same_mode(f.fileno())
                f.write(data)
                f.flush()
                if self.durable:  # kept across a crash or a reboot; else as a shell's redirection writes
                    os.fsync(f.fileno())
            self._put(tmp, real)
        except BaseException:
            try:  # noqa: SIM105
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def _same_mode(self, fd: int) -> None:
        keep = self._keep
        if keep is None:
            umask = os.umask(0o022)  # the only way to read the umask: set it straight back
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)  # what open() gives a new file (mkstemp makes it private)
            return
        try:  # noqa: SIM105 -- only root may give a file away; others keep their own
            os.fchown(fd, keep.st_uid, keep.st_gid)
        except OSError:
            pass
        os.fchmod(fd, stat.S_IMODE(keep.st_mode))

    def _put(self, tmp: str, real: str) -> None:
        """The rename, after checking again that it replaces only what was decided on."""
        if self._keep is None:
            try:
                os.link(tmp, real)  # never over anything that appeared at the path meanwhile
            except FileExistsError as exc:
                raise UnsafeFile(f"{self.path}: {real} appeared while writing: not replaced") from exc
            except OSError:  # a file system without hard links: check, then rename
                if os.path.lexists(real):
                    raise UnsafeFile(f"{self.path}: {real} appeared while writing: not replaced") from None
                os.replace(tmp, real)
                return
            os.unlink(tmp)
            return
        now = os.lstat(real)
        if not stat.S_ISREG(now.st_mode):
            raise UnsafeFile(f"{self.path}: {real} is {_kind(now.st_mode)} now: not replaced")
        os.replace(tmp, real)


def write_file(path: str, data: bytes, *, durable: bool) -> None:
    """``Target(path, durable=durable).write(data)``: one call for writers that decide and write at once."""
    target = Target(path, durable=durable)
    try:
        target.write(data)
    finally:
        target.close()


def _new_private_file(parent: str, name: str) -> tuple[int, str]:
    """A new file beside ``name``, mode 0600, made with O_EXCL under a random name, as ``tempfile.mkstemp``
    makes one (tempfile, and the random module it loads, would be most of ``discover -o``'s output cost)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = os.path.join(parent, f".{name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", parent)
