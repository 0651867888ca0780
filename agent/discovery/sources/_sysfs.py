"""Reading one sysfs directory's attributes into typed values, every failure becoming a Problem.

The sysfs sources share this: a missing optional attribute is ``None``, a missing required one or a value
that does not parse is a :class:`~topology.Problem` on that device, and nothing raises.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Callable

from topology import SNAPSHOT_LIMITS, Aspect, Fact, Problem

from ..access import FsRoot
from ._parse import LOWER_HEX_DIGITS, hex_digits, one_line
from ._registry import SourceError, SubsystemAbsent, too_many

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")


def sysfs_bdf(name: str) -> bool:
    """A PCI function's directory name in sysfs: always the full domain, lowercase
    (``[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]``)."""
    parts = one_line(name).split(":")
    return (len(parts) == 3 and hex_digits(parts[0], 4, 8, LOWER_HEX_DIGITS)
            and hex_digits(parts[1], 2, 2, LOWER_HEX_DIGITS) and len(parts[2]) == 4
            and hex_digits(parts[2][:2], 2, 2, LOWER_HEX_DIGITS) and parts[2][2] == "." and parts[2][3] in "01234567")


_NOT_NAMES = ("", ".", "..")  # not an entry of the directory: read through the root


class Reader:
    """Attributes of one directory below the root, read once each; problems collect in ``problems``.

    Every read names the aspects of ``fact_subject`` (default ``subject``) that stay unknown when it
    fails, so each problem says what it leaves unknown.

    Attributes are opened beside the directory, resolved once. The first one that is absent has the
    directory listed, and from then on an attribute that is not listed is absent without a call and
    without the checks of _why_absent (in hwloc's gathered trees nearly half the reads are such);
    ``list_first`` lists it before the first read, where absent attributes are expected.
    """

    __slots__ = ("_dir", "_dir_ok", "_directory", "_listed", "_missed", "_names", "_root", "fact_subject",
                 "problems", "source", "subject")

    def __init__(self, root: FsRoot, source: str, subject: str, directory: str, *,
                 fact_subject: str | None = None, list_first: bool = False) -> None:
        self._root = root
        self._dir = directory
        self._directory = root.directory(directory)
        self._dir_ok: bool | None = None
        self._names: frozenset[str] | None = None
        self._listed = False
        self._missed = False
        self.source = source
        self.subject = subject
        self.fact_subject = subject if fact_subject is None else fact_subject
        self.problems: list[Problem] = []
        if list_first:
            self._list()

    @property
    def missed(self) -> bool:
        """Whether an attribute asked for was not in the directory's listing."""
        return self._missed

    def facts(self, aspects: tuple[Aspect, ...]) -> tuple[Fact, ...]:
        return tuple(Fact(subject=self.fact_subject, aspect=a) for a in aspects)

    def problem(self, message: str, aspects: tuple[Aspect, ...], *, extra: tuple[Fact, ...] = ()) -> None:
        self.problems.append(Problem(source=self.source, subject=self.subject, message=message,
                                     unknown=self.facts(aspects) + extra))

    def text(self, name: str, aspects: tuple[Aspect, ...], *, required: bool = False) -> str | None:
        """The attribute, stripped; ``None`` when absent (a problem only when ``required``) or unreadable
        (always a problem: permission denied, a device gone, not a regular file, over the size limit)."""
        try:
            listed_absent = False
            if "/" in name or name in _NOT_NAMES:  # a path below the directory (``ports/1/state``)
                value = self._root.attr(self._dir, name)
            elif self._names is not None and name not in self._names:
                value, listed_absent = None, True
                self._missed = True
            else:
                try:
                    value = self._directory.attr(name)
                except OSError:  # not for an attribute the listing would have shown absent (EACCES)
                    if self._listed or not self._unlisted(name):
                        raise
                    value, listed_absent = None, True
                if value is None and not listed_absent and not self._listed:
                    listed_absent = self._unlisted(name)
            if value is None and not listed_absent and (why := self._why_absent(name)):
                self.problem(f"{name}: {why}", aspects)
                return None
            if value == "" and self.read_bytes(name, 1) == b"":
                # the kernel ends every attribute with a newline, an empty one too: zero bytes is a truncation
                self.problem(f"{name}: empty file", aspects)
                return None
        except OSError as exc:
            self.problem(f"{name}: {describe_os_error(exc)}", aspects)
            return None
        if value is None and required:
            self.problem(f"{name}: missing", aspects)
        return value

    def read_bytes(self, name: str, limit: int) -> bytes | None:
        """Up to ``limit`` bytes of the attribute (``FsRoot.read_bytes``); OSError when unreadable."""
        if "/" in name or name in _NOT_NAMES:
            return self._root.read_bytes(self._dir, name, limit=limit)
        if self._names is not None and name not in self._names:
            self._missed = True
            return None
        try:
            return self._directory.read_bytes(name, limit)
        except OSError:
            if self._listed or not self._unlisted(name):
                raise
            return None

    def _unlisted(self, name: str) -> bool:
        """Whether the directory's listing (made now if not yet) lacks ``name``: no entry at all, not even
        a dangling link."""
        names = self._list()
        if names is None or name in names:
            return False
        self._missed = True
        return True

    def _list(self) -> frozenset[str] | None:
        """Lists the directory, once; ``None`` when it is no directory or cannot be listed (a directory
        with search permission only, a loop: then every attribute is read on its own)."""
        if not self._listed:
            self._listed = True
            try:
                self._names = self._directory.names()
            except OSError:
                return None
            self._dir_ok = self._names is not None  # else the read fails and _why_absent says why
        return self._names

    def _why_absent(self, name: str) -> str | None:
        """An attribute that is absent because its directory is gone, or that is a dangling link, was not
        read: that is a problem, not an optional attribute's absence. Asked only when one is absent."""
        if self._dir_ok is None:
            self._dir_ok = self._root.is_dir(self._dir)
        if not self._dir_ok:
            return f"{self._dir} is not a readable directory"
        if self._root.exists(self._dir, name):
            return "a link to nothing"
        return None

    def parsed(self, name: str, parse: Callable[[str], T], aspects: tuple[Aspect, ...], *,
               required: bool = False) -> T | None:
        raw = self.text(name, aspects, required=required)
        if raw is None:
            return None
        try:
            return parse(raw)
        except (ValueError, OverflowError):
            self.problem(f"{name}: cannot parse {raw[:60]!r}", aspects)
            return None

    def present(self, name: str) -> bool:
        """Whether the directory has an entry ``name`` (a dangling link counts), listing it if not yet."""
        names = self._list()
        if names is not None:
            return name in names
        return self._root.exists(self._dir, name)

    def link_name(self, name: str) -> str | None:
        """An optional link's last component (``driver`` -> ``nvidia``); None when absent or unreadable."""
        if self._names is not None and name not in self._names:
            return None
        try:
            return self._root.readlink_name(self._dir, name)
        except OSError:
            return None

    def listdir(self, name: str, aspects: tuple[Aspect, ...]) -> list[str]:
        try:
            return self._root.listdir(self._dir, name)
        except OSError as exc:
            self.problem(f"{name or '.'}: {describe_os_error(exc)}", aspects)
            return []


def describe_os_error(exc: OSError) -> str:
    return str(exc.strerror or exc)


def resolve_link(root: FsRoot, path: str) -> str | None:
    """Where a sysfs symlink points, as a normalised path below the root; ``None`` when not a link.
    Raises OSError when the link cannot be read (a loop on the way, permission)."""
    target = root.readlink(path)
    if target is None:
        return None
    return _link_target(path, target)


@functools.lru_cache(maxsize=1024)
def _link_target(path: str, target: str) -> str:
    """Pure, and asked for every PCI function and class entry in every pass: remembered."""
    return posixpath.normpath(posixpath.join(posixpath.dirname(path), target))


def device_path(root: FsRoot, entry: str) -> str | None:
    """The ``/sys/devices`` path of a class entry (``/sys/class/net/eth0``): the entry's link, or its
    ``device`` link for kernels that made class entries directories."""
    return resolve_link(root, entry) or resolve_link(root, f"{entry}/device")


def pci_function_in(path: str | None) -> str | None:
    """The PCI function nearest below a class entry, from its device path (:func:`class_entries`):
    ``0000:82:00.0`` for ``mlx4_0``, else ``None``."""
    if path is None:
        return None
    return next((part for part in reversed(path.split("/")) if sysfs_bdf(part)), None)


_SYS_DEVICES = "/sys/devices/"


def class_entries(root: FsRoot, source: str, class_dir: str, *, absent: str,
                  most: str | None = None) -> tuple[list[tuple[str, str, str | None]], list[Problem]]:
    """``(name, entry, device path)`` of each entry of a class directory (``/sys/class/net``), and a problem
    for each entry that leads nowhere real (unreadable, not a directory, dangling, outside ``/sys/devices``):
    such an entry hides a device, so the node's NIC inventory is unknown. The directory's absence is
    :class:`SubsystemAbsent` (with ``absent``), as :func:`list_subsystem` says."""
    unknown = (Fact(subject="node", aspect=Aspect.NICS),)
    found: list[tuple[str, str, str | None]] = []
    problems: list[Problem] = []
    for name in list_subsystem(root, class_dir, absent=absent, most=most):
        entry = f"{class_dir}/{name}"
        try:
            path = device_path(root, entry)
            real = root.is_dir(entry) and (path is None or (root.is_dir(path) and path.startswith(_SYS_DEVICES)))
        except OSError as exc:
            problems.append(Problem(source=source, subject=name, message=f"{entry}: {describe_os_error(exc)}",
                                    unknown=unknown))
            continue
        if not real:
            problems.append(Problem(source=source, subject=name, message=f"{entry} is not a directory under "
                                    f"/sys/devices (it points to {path}): not read", unknown=unknown))
            continue
        found.append((name, entry, path))
    return found, problems


def list_subsystem(root: FsRoot, path: str, *, absent: str, marker: str | None = None,
                   most: str | None = None) -> list[str]:
    """The entries of a subsystem's directory. Raises :class:`SubsystemAbsent` (with ``absent``) when
    ``marker`` (default ``path``) does not exist, :class:`SourceError` when it cannot be listed or holds
    more entries than a snapshot may hold of ``most`` (a key of ``topology.SNAPSHOT_LIMITS``)."""
    try:
        if not root.exists(marker or path):
            raise SubsystemAbsent(absent)
        names = root.listdir(path)
    except OSError as exc:
        raise SourceError(f"{path}: {describe_os_error(exc)}") from exc
    if most is not None:
        too_many(f"{path}: entries", len(names), SNAPSHOT_LIMITS[most])
    return names

