"""What a discovery read: every file, link, directory listing and NVML call, while a :class:`Reads` is active.

Nothing is recorded unless a caller asks (``with Reads() as reads: discover(ctx)``): a pass that is not
watched pays one truth test of a module-level list per read. The sweep (tests/test_truth_sweep.py) and the
facts table (``agent.discovery.assemble.FACT_ROWS``) use what a pass read: each file read must be named
by a row of the table, and each is edited in turn.
"""

from __future__ import annotations

import os
from types import TracebackType

ACTIVE: list[Reads] = []  # the recorders of the passes being watched, innermost last (one thread: the pass)


class Reads:
    """The host paths a pass read (files, symlinks, directories) and the NVML calls it made, in order."""

    __slots__ = ("calls", "dirs", "files", "links")

    def __init__(self) -> None:
        self.files: list[str] = []
        self.links: list[str] = []
        self.dirs: list[str] = []
        self.calls: list[str] = []

    def __enter__(self) -> Reads:
        ACTIVE.append(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        ACTIVE.remove(self)

    def below(self, root: str | os.PathLike[str]) -> tuple[str, ...]:
        """The files read below ``root``, relative to it (``sys/bus/pci/devices/.../numa_node``), each once, in
        the order first read; the files of other roots are left out."""
        top = os.fspath(root).rstrip("/") + "/"
        seen = dict.fromkeys(p[len(top):] for p in self.files if p.startswith(top))
        return tuple(seen)


def file_read(path: str) -> None:
    ACTIVE[-1].files.append(path)


def link_read(path: str) -> None:
    ACTIVE[-1].links.append(path)


def dir_read(path: str) -> None:
    ACTIVE[-1].dirs.append(path)


def call_made(name: str) -> None:
    ACTIVE[-1].calls.append(name)
