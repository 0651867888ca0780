"""Reading one sysfs directory's attributes into typed values, every failure becoming a Problem.

The sysfs sources share this: a missing optional attribute is ``None``, a missing required one or a value
that does not parse is a :class:`~topology.Problem` on that device, and nothing raises.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import TypeVar

from topology import Problem

from .._fsroot import FsRoot
from ._registry import SourceError, SubsystemAbsent

T = TypeVar("T")

_LINK_SPEED = re.compile(r"^(\d+(?:\.\d+)?) GT/s(?: PCIe)?$")
# A PCI function's directory name in sysfs: always the full domain, lowercase.
SYSFS_BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


class Reader:
    """Attributes of one directory below the root, read once each; problems collect in ``problems``."""

    __slots__ = ("_dir", "_root", "problems", "source", "subject")

    def __init__(self, root: FsRoot, source: str, subject: str, directory: str) -> None:
        self._root = root
        self._dir = directory
        self.source = source
        self.subject = subject
        self.problems: list[Problem] = []

    def problem(self, message: str) -> None:
        self.problems.append(Problem(source=self.source, subject=self.subject, message=message))

    def text(self, name: str, *, required: bool = False) -> str | None:
        try:
            value = self._root.attr(self._dir, name)
        except OSError as exc:  # permission, or a device that fell off the bus mid-read
            self.problem(f"{name}: {exc.strerror or exc}")
            return None
        if value is None and required:
            self.problem(f"{name}: missing")
        return value

    def parsed(self, name: str, parse: Callable[[str], T], *, required: bool = False) -> T | None:
        raw = self.text(name, required=required)
        if raw is None:
            return None
        try:
            return parse(raw)
        except ValueError:
            self.problem(f"{name}: cannot parse {raw[:60]!r}")
            return None

    def link_name(self, name: str) -> str | None:
        return self._root.readlink_name(self._dir, name)

    def listdir(self, name: str = "") -> list[str]:
        try:
            return self._root.listdir(self._dir, name)
        except OSError as exc:
            self.problem(f"{name or '.'}: {exc.strerror or exc}")
            return []


def hex_int(text: str) -> int:
    """``0x10de`` -> 0x10de; ValueError on anything else."""
    if not text.lower().startswith("0x"):
        raise ValueError(text)
    return int(text, 16)


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def numa_node(text: str) -> int | None:
    """The kernel's ``numa_node``: -1 means it does not know (no ACPI proximity), not an error."""
    value = int(text)
    if value == -1:
        return None
    if value < 0:
        raise ValueError(text)
    return value


def link_speed_gts(text: str) -> float | None:
    """``8.0 GT/s PCIe`` (or ``8 GT/s`` from older kernels) -> 8.0; ``Unknown`` -> None."""
    if text.startswith("Unknown"):
        return None
    m = _LINK_SPEED.match(text)
    if m is None:
        raise ValueError(text)
    return float(m.group(1))


def bdf_key(bdf: str) -> tuple[int, str]:
    """Sort key for bus ids, numeric domain first: ``10000:00:04.0`` after ``ffff:00:00.0``."""
    domain, _, rest = bdf.partition(":")
    try:
        return int(domain, 16), rest
    except ValueError:
        return -1, bdf


def resolve_link(root: FsRoot, path: str) -> str | None:
    """Where a sysfs symlink points, as a normalised path below the root; ``None`` when not a link."""
    target = root.readlink(path)
    if target is None:
        return None
    return posixpath.normpath(posixpath.join(posixpath.dirname(path), target))


def device_path(root: FsRoot, entry: str) -> str | None:
    """The ``/sys/devices`` path of a class entry (``/sys/class/net/eth0``): the entry's link, or its
    ``device`` link for kernels that made class entries directories."""
    return resolve_link(root, entry) or resolve_link(root, f"{entry}/device")


def pci_function_of(root: FsRoot, entry: str) -> str | None:
    """The PCI function nearest below a class entry (``0000:82:00.0`` for ``mlx4_0``), else ``None``."""
    path = device_path(root, entry)
    if path is None:
        return None
    return next((part for part in reversed(path.split("/")) if SYSFS_BDF.match(part)), None)


def list_subsystem(root: FsRoot, path: str, *, absent: str, marker: str | None = None) -> list[str]:
    """The entries of a subsystem's directory. Raises :class:`SubsystemAbsent` (with ``absent``) when
    ``marker`` (default ``path``) does not exist, :class:`SourceError` when it cannot be listed."""
    if not root.exists(marker or path):
        raise SubsystemAbsent(absent)
    try:
        return root.listdir(path)
    except OSError as exc:
        raise SourceError(f"{path}: {exc.strerror or exc}") from exc
