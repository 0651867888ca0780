"""The only way to ``/sys`` and ``/proc``: every read is relative to a root that tests can move.

A root other than ``/`` is a jail. Paths are resolved component by component below it, the way
``openat2(RESOLVE_IN_ROOT)`` does: absolute symlink targets restart at the root, ``..`` stops at the root and a
chain of more than 40 links fails with ``ELOOP``. The live root skips that walk and uses plain calls. Either
way only regular files are read, each in one bounded read. ``FsRoot`` is a plain class, not a dataclass (start-up).
Every read is recorded while a pass is watched (``_record``).
"""

from __future__ import annotations

import errno
import os
import stat

from . import _record
from ._jail import (
    ABSENT,
    MAX_ATTR_BYTES,
    OPEN_FLAGS,
    THROUGH_ROOT,
    LinkBudget,
    attribute_text,
    components,
    read_regular,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from pathlib import Path  # paths are strings here: pathlib (and urllib, which it loads) cost start-up


class FsRoot:
    """A directory tree standing for ``/``: the live machine's root or a gathered tree (immutable, by ``base``)."""

    __slots__ = ("_dirs", "_live", "_paths", "_prefix", "base")
    base: str | os.PathLike[str]
    _prefix: str
    _live: bool
    # Resolved directories below the root by "<resolved parent>/<name>", and whole paths as callers spell them:
    # each walked once (a pass reads thousands of attributes). A fixture tree does not change; live is not cached.
    _dirs: dict[str, str]
    _paths: dict[tuple[str, ...], str]

    def __init__(self, base: str | os.PathLike[str] = "/") -> None:
        for name, value in (("base", base), ("_live", os.path.realpath(base) == "/"),
                            ("_prefix", os.fspath(base).rstrip("/")), ("_dirs", {}), ("_paths", {})):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __eq__(self, other: object) -> bool:
        return self.base == other.base if other.__class__ is self.__class__ else NotImplemented

    def __hash__(self) -> int:
        return hash((self.base,))

    def path(self, *parts: str) -> Path:
        # Path("/fx") / "/sys" would drop the fixture root: strip leading slashes, as hwloc does.
        from pathlib import Path

        return Path(self.base).joinpath(*(p.lstrip("/") for p in parts))

    def _join(self, parts: tuple[str, ...]) -> str:
        # The string twin of path(): discovery reads thousands of attributes and pathlib is slow.
        return os.path.join(os.fspath(self.base), *(p.lstrip("/") for p in parts))

    @property
    def is_live(self) -> bool:
        return self._live

    def attr(self, *parts: str) -> str | None:
        """One bounded read of a sysfs attribute, stripped; ``None`` when it does not exist. Permission and
        I/O errors (a device that fell off the bus) propagate as OSError, and so do :class:`NotARegularFile`
        and :class:`AttributeTooLarge`: the caller records them as a problem on the device it was reading."""
        return self._text(self._read(parts, MAX_ATTR_BYTES + 1), parts)

    def read_bytes(self, *parts: str, limit: int = 4096) -> bytes | None:
        """Up to ``limit`` bytes in one read (PCI ``config``); ``None`` when it does not exist. OSError as ``attr``."""
        return self._read(parts, limit)

    def _read(self, parts: tuple[str, ...], limit: int) -> bytes | None:
        try:
            fd = os.open(self._join(parts), OPEN_FLAGS) if self._live else self._open_jailed(parts)
        except ABSENT:
            return None
        return self._read_fd(fd, limit, parts)

    def _read_fd(self, fd: int, limit: int, parts: tuple[str, ...]) -> bytes:
        return read_regular(fd, limit, lambda: self._join(parts))

    def _text(self, data: bytes | None, parts: tuple[str, ...]) -> str | None:
        return None if data is None else attribute_text(data, lambda: self._join(parts))

    def listdir(self, *parts: str) -> list[str]:
        """Sorted entries of a directory; empty when it does not exist or is not a directory."""
        if _record.ACTIVE:
            _record.dir_read(self._join(parts))
        try:
            return sorted(os.listdir(self._resolved(parts)))
        except ABSENT:
            return []

    def directory(self, *parts: str) -> Directory:
        return Directory(self, parts)  # many entries of a directory: resolved once, on its first read

    def exists(self, *parts: str) -> bool:
        """Whether the path exists; a symlink counts even when its target does not."""
        try:
            os.lstat(self._unfollowed(parts))
        except ABSENT:
            return False
        return True

    def is_dir(self, *parts: str) -> bool:
        """Whether the path, symlinks followed inside the root, is a directory."""
        try:
            return stat.S_ISDIR(os.stat(self._resolved(parts)).st_mode)
        except ABSENT:
            return False

    def is_plain_dir(self, *parts: str) -> bool:
        """Whether the path is a directory itself, not a link to one (sysfs device directories never are)."""
        try:
            return stat.S_ISDIR(os.lstat(self._unfollowed(parts)).st_mode)
        except ABSENT:
            return False

    def realpath(self, *parts: str) -> str:
        """The symlink target of ``parts`` relative to the root, with a leading ``/``. Resolves inside the root,
        so an absolute link in a fixture never escapes to the live machine. Components that do not exist are
        kept as written, as ``os.path.realpath`` does."""
        if _record.ACTIVE:
            _record.link_read(self._join(parts))
        if self._live:
            return os.path.realpath(self._join(parts))
        return self._walk("", components(parts), LinkBudget(), strict=False)[0] or "/"

    def readlink_name(self, *parts: str) -> str | None:
        """Last component of a symlink's target (``driver`` -> ``nvidia``); ``None`` when absent."""
        target = self.readlink(*parts)
        return None if target is None else os.path.basename(target.rstrip("/"))

    def readlink(self, *parts: str) -> str | None:
        """A symlink's target as written (one syscall, unlike ``realpath``); ``None`` when not a link."""
        if _record.ACTIVE:
            _record.link_read(self._join(parts))
        try:
            return os.readlink(self._unfollowed(parts))
        except ABSENT:
            return None
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # not a symlink
                return None
            raise

    def _resolved(self, parts: tuple[str, ...]) -> str:
        """The host path of ``parts`` with every symlink followed inside the root."""
        if self._live:
            return self._join(parts)
        return self._prefix + self._resolved_below(parts)

    def _resolved_below(self, parts: tuple[str, ...]) -> str:
        """``parts`` resolved strictly below the root; directories are remembered by how they were spelt."""
        cached = self._paths.get(parts)
        if cached is not None:
            return cached
        resolved, is_dir = self._walk("", components(parts), LinkBudget(), strict=True)
        if is_dir:
            self._paths[parts] = resolved
        return resolved

    def _unfollowed(self, parts: tuple[str, ...]) -> str:
        """The host path of ``parts`` with the last component left as it is (a symlink stays a symlink)."""
        if self._live:
            return self._join(parts)
        head, slash, name = (parts[-1] if parts else "").rpartition("/")
        if name not in ("", ".", ".."):
            # (directory, attribute name) or a path ending in a name: the usual read; the resolution of
            # the directory it is in is remembered
            return f"{self._prefix}{self._resolved_below((*parts[:-1], head) if slash else parts[:-1])}/{name}"
        names = components(parts)
        if not names or names[-1] == "..":
            return self._resolved(parts)
        parent, _ = self._walk("", names[:-1], LinkBudget(), strict=True)
        return f"{self._prefix}{parent}/{names[-1]}"

    def _open_jailed(self, parts: tuple[str, ...]) -> int:
        try:
            return os.open(self._unfollowed(parts), OPEN_FLAGS | os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
        # The last component is a symlink: follow it inside the root, then open what it names.
        return os.open(self._resolved(parts), OPEN_FLAGS | os.O_NOFOLLOW)

    def _walk(self, start: str, names: list[str], budget: LinkBudget, *, strict: bool) -> tuple[str, bool]:
        """Resolve ``names`` from ``start`` (a resolved path below the root, ``""`` for the root itself): the
        resolved path below the root and whether it is a directory. ``strict`` raises FileNotFoundError for a
        missing component; otherwise missing components are kept as written."""
        here, is_dir = start, True
        for name in names:
            if name == "..":
                if strict and not is_dir:
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), self._prefix + here)
                here, is_dir = here[: here.rfind("/")], True  # "" stays "": the root is its own parent
                continue
            here, is_dir = self._step(here, name, budget, strict=strict)
        return here, is_dir

    def _step(self, parent: str, name: str, budget: LinkBudget, *, strict: bool) -> tuple[str, bool]:
        """One component below a resolved directory: (resolved path, whether it is a directory)."""
        key = f"{parent}/{name}"
        cached = self._dirs.get(key)
        if cached is not None:
            return cached, True
        host = self._prefix + key
        try:
            mode = os.lstat(host).st_mode
        except ABSENT:
            if strict:
                raise
            return key, False
        if stat.S_ISDIR(mode):
            self._dirs[key] = key
            return key, True
        if not stat.S_ISLNK(mode):
            return key, False
        budget.spend(host)
        target = os.readlink(host)
        start = "" if target.startswith("/") else parent  # an absolute target starts again at the root
        resolved, is_dir = self._walk(start, components((target,)), budget, strict=strict)
        if is_dir and strict:  # a lenient walk may have passed through missing components: not cached
            self._dirs[key] = resolved
        return resolved, is_dir


class Directory:
    """A directory below the root (:meth:`FsRoot.directory`) whose entries are read as :meth:`FsRoot.attr`
    and :meth:`FsRoot.read_bytes` read them, answer for answer, without resolving the directory each time:
    each opens ``<resolved directory>/<name>`` (``O_NOFOLLOW`` in a jail, where an entry that is a link is
    followed inside the root as before). ``name`` is one plain name, no ``/``."""

    __slots__ = ("_flags", "_host", "_parts", "_root")

    def __init__(self, root: FsRoot, parts: tuple[str, ...]) -> None:
        self._root, self._parts = root, parts
        self._host: str | None = None
        self._flags = OPEN_FLAGS if root.is_live else OPEN_FLAGS | os.O_NOFOLLOW

    def names(self) -> frozenset[str] | None:
        """The entries, listed now; ``None`` where :meth:`FsRoot.is_dir` is false; OSError as FsRoot's reads."""
        if _record.ACTIVE:
            _record.dir_read(self._root._join(self._parts))
        try:
            return frozenset(os.listdir(self._host or self._root._resolved(self._parts)))
        except ABSENT:
            return None

    def _open(self, name: str) -> int | None:
        """The entry opened for reading, ``None`` when absent, ``THROUGH_ROOT`` when it is a link in a jail
        (read through the root, which follows it inside the root); OSError as FsRoot's reads."""
        host = self._host
        if host is None:
            try:
                host = self._root._resolved(self._parts)
            except ABSENT:  # no such directory (not remembered: FsRoot's reads resolve it again too)
                return None
            self._host = host
        try:
            return os.open(f"{host}/{name}", self._flags)
        except ABSENT:
            return None
        except OSError as exc:
            if exc.errno != errno.ELOOP or self._root.is_live:
                raise
            return THROUGH_ROOT

    def attr(self, name: str) -> str | None:
        """:meth:`FsRoot.attr` of the entry ``name``."""
        fd = self._open(name)
        if fd is None:
            return None
        if fd == THROUGH_ROOT:
            return self._root.attr(*self._parts, name)
        def filename() -> str:
            return self._root._join((*self._parts, name))

        return attribute_text(read_regular(fd, MAX_ATTR_BYTES + 1, filename), filename)

    def read_bytes(self, name: str, limit: int) -> bytes | None:
        """:meth:`FsRoot.read_bytes` of the entry ``name``."""
        fd = self._open(name)
        if fd is None:
            return None
        if fd == THROUGH_ROOT:
            return self._root.read_bytes(*self._parts, name, limit=limit)
        return self._root._read_fd(fd, limit, (*self._parts, name))
