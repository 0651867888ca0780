"""What file-system access refuses and how it counts: error kinds, the link budget, the open flags."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable

from . import _record

MAX_ATTR_BYTES = 65536
_MAX_LINKS = 40  # the kernel's MAXSYMLINKS
# O_NONBLOCK: opening a FIFO planted in the tree returns at once instead of waiting for a writer.
OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
ABSENT = (FileNotFoundError, NotADirectoryError)
THROUGH_ROOT = -1  # Directory._open: the entry is a link in a jail, to be followed inside the root


class NotARegularFile(OSError):
    """A path that names a FIFO, socket, device or directory where an attribute file was expected."""

    def __init__(self, kind: str, filename: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file ({kind})", filename)


class AttributeTooLarge(OSError):
    """An attribute holding more than the read limit: no sysfs attribute does, so it is not one."""

    def __init__(self, limit: int, filename: str) -> None:
        super().__init__(errno.EFBIG, f"attribute larger than {limit} bytes", filename)


def kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"


def components(parts: tuple[str, ...]) -> list[str]:
    return [c for p in parts for c in p.split("/") if c and c != "."]


class LinkBudget:
    """Symlinks followed while resolving one path; a loop runs it out."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = _MAX_LINKS

    def spend(self, filename: str) -> None:
        self.left -= 1
        if self.left < 0:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), filename)


def read_regular(fd: int, limit: int, filename: Callable[[], str]) -> bytes:
    """One read of at most ``limit`` bytes from ``fd``, which it closes; NotARegularFile unless it is a file.
    ``filename`` names it in the error (computed only then)."""
    if _record.ACTIVE:
        _record.file_read(filename())
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # sysfs attributes are regular files, whatever size they report
            raise NotARegularFile(kind_of(mode), filename())
        return os.read(fd, limit)  # one read: some drivers spin on EOF
    finally:
        os.close(fd)


def attribute_text(data: bytes, filename: Callable[[], str]) -> str:
    """An attribute's bytes (read with one byte over the limit) as stripped text; AttributeTooLarge over it."""
    if len(data) > MAX_ATTR_BYTES:
        raise AttributeTooLarge(MAX_ATTR_BYTES, filename())
    return data.decode(errors="replace").strip()
