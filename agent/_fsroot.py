"""The only door to ``/sys`` and ``/proc``: every read is relative to a root that tests can move."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_MAX_ATTR_BYTES = 65536


@dataclass(frozen=True, slots=True)
class FsRoot:
    base: Path = Path("/")

    def path(self, *parts: str) -> Path:
        # Path("/fx") / "/sys" would drop the fixture root: strip leading slashes, as hwloc does.
        return self.base.joinpath(*(p.lstrip("/") for p in parts))

    def _join(self, parts: tuple[str, ...]) -> str:
        # The string twin of path(): discovery reads thousands of attributes and pathlib is slow.
        return os.path.join(str(self.base), *(p.lstrip("/") for p in parts))

    @property
    def is_live(self) -> bool:
        return self.base.resolve() == Path("/")

    def attr(self, *parts: str) -> str | None:
        """One bounded read of a sysfs attribute, stripped; ``None`` when it does not exist.

        Permission errors and I/O errors (a device that fell off the bus) propagate as OSError: the
        caller records them as a problem on the device it was reading.
        """
        data = self.read_bytes(*parts, limit=_MAX_ATTR_BYTES)
        return None if data is None else data.decode(errors="replace").strip()

    def read_bytes(self, *parts: str, limit: int = 4096) -> bytes | None:
        """One bounded binary read (PCI ``config``); ``None`` when it does not exist. OSError as ``attr``."""
        try:
            fd = os.open(self._join(parts), os.O_RDONLY)  # one read: some drivers spin on EOF
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            return os.read(fd, limit)
        finally:
            os.close(fd)

    def listdir(self, *parts: str) -> list[str]:
        """Sorted entries of a directory; empty when it does not exist."""
        try:
            return sorted(os.listdir(self._join(parts)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def exists(self, *parts: str) -> bool:
        return os.path.lexists(self._join(parts))

    def realpath(self, *parts: str) -> str:
        """The symlink target of ``parts`` relative to the root, with a leading ``/``.

        Resolves inside the root, so an absolute link in a fixture never escapes to the live machine.
        """
        full = os.path.realpath(self.path(*parts))
        base = os.path.realpath(self.base)
        rel = os.path.relpath(full, base)
        return "/" if rel == "." else "/" + rel

    def readlink_name(self, *parts: str) -> str | None:
        """Last component of a symlink's target (``driver`` -> ``nvidia``); ``None`` when absent."""
        target = self.readlink(*parts)
        return None if target is None else os.path.basename(target.rstrip("/"))

    def readlink(self, *parts: str) -> str | None:
        """A symlink's target as written (one syscall, unlike ``realpath``); ``None`` when not a link."""
        try:
            return os.readlink(self._join(parts))
        except OSError:
            return None
