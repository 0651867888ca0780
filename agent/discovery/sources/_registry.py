"""One table of discovery sources, one per subsystem, each with a default state (node_exporter style).

A source is a function ``(DiscoveryContext) -> facts``: a frozen record of what it read, never model
entities. It raises :class:`SubsystemAbsent` when its subsystem is not on this node and
:class:`SourceError` when it is there but unreadable; problems with single devices go into its facts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from topology import Aspect, Problem, Record, SourceOutcome, SourceStatus, TopolinkError, node_fact

from ..access import DiscoveryContext
from ._catalog import SOURCE_FLAGS

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (a start-up cost) for it

if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")


class SourceError(TopolinkError):
    """A source's whole subsystem could not be read."""


class SubsystemAbsent(SourceError):
    """The subsystem is not on this node (no driver, no InfiniBand): not a failure."""


def too_many(where: str, found: int, most: int | None) -> None:
    """:class:`SourceError` when a machine holds more of something than a snapshot may
    (``topology.SNAPSHOT_LIMITS``): the source fails, what it covers is unknown, and no command does work
    without bound on what it read."""
    if most is not None and found > most:
        raise SourceError(f"{where}: {found}, more than the {most} topolink reads")


class SourceSpec(Record):
    """A source in the table: its reader, default state, flag help and what it covers."""

    __slots__ = __match_args__ = ("name", "read", "enabled_by_default", "help", "covers")
    name: str
    read: Callable[[DiscoveryContext], Any]
    enabled_by_default: bool
    help: str
    covers: tuple[Aspect, ...]  # node-wide facts left unknown when the source fails or is turned off

    def __init__(self, *, name: str, read: Callable[[DiscoveryContext], Any], enabled_by_default: bool, help: str,
                 covers: tuple[Aspect, ...]) -> None:
        self._fill(locals())


_SOURCES: dict[str, SourceSpec] = {}
_CATALOG = {name: (default, help) for name, default, help in SOURCE_FLAGS}


if TYPE_CHECKING:
    Reader = Callable[[DiscoveryContext], T]


def register(name: str, *, covers: tuple[Aspect, ...], default: bool = True,
             help: str) -> Callable[[Reader[T]], Reader[T]]:
    """Add a source to the table under ``name``; ``default`` is whether it runs without a flag, ``covers``
    the node-wide facts nobody knows when it fails or is turned off."""

    def wrap(fn: Reader[T]) -> Reader[T]:
        if name in _SOURCES:
            raise ValueError(f"source {name!r} registered twice")
        if _CATALOG.get(name) != (default, help):
            raise ValueError(f"source {name!r}: its row in agent/discovery/sources/_catalog.py must say the same "
                             "default and help (the command line reads its flags from there)")
        _SOURCES[name] = SourceSpec(name=name, read=fn, enabled_by_default=default, help=help, covers=covers)
        return fn

    return wrap


def source_table() -> Mapping[str, SourceSpec]:
    return dict(sorted(_SOURCES.items()))


class Gathered(Record):
    """Every enabled source's facts (absent or failed ones are missing) and outcomes."""

    __slots__ = __match_args__ = ("facts", "outcomes", "problems")
    facts: Mapping[str, Any]
    outcomes: tuple[SourceOutcome, ...]
    problems: tuple[Problem, ...]

    def __init__(self, *, facts: Mapping[str, Any], outcomes: tuple[SourceOutcome, ...],
                 problems: tuple[Problem, ...]) -> None:
        self._fill(locals())

    def get(self, name: str, kind: type[T]) -> T | None:
        value = self.facts.get(name)
        return value if isinstance(value, kind) else None


def _describe(exc: Exception) -> str:
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"unreadable: {exc.strerror or exc}{where}"
    return str(exc)


def run_sources(ctx: DiscoveryContext, enabled: Iterable[str]) -> Gathered:
    """Runs the enabled sources; every other source of the table is recorded as disabled, with the facts
    it would have read unknown (a sink must not delete NIC labels because NICs were not looked at)."""
    wanted = set(enabled)
    facts: dict[str, Any] = {}
    outcomes: list[SourceOutcome] = []
    problems: list[Problem] = []
    for name, spec in sorted(_SOURCES.items()):
        if name not in wanted:
            outcomes.append(SourceOutcome(name=name, status=SourceStatus.DISABLED, duration_seconds=0.0,
                                          detail="turned off"))
            problems.append(Problem(source=name, subject=name, message="source turned off: not read",
                                    unknown=tuple(node_fact(a) for a in spec.covers)))
            continue
        t0 = time.perf_counter()
        detail = ""
        try:
            facts[name] = spec.read(ctx)
            status = SourceStatus.OK
        except SubsystemAbsent as exc:
            status, detail = SourceStatus.ABSENT, str(exc)
        except (TopolinkError, OSError) as exc:  # ours, or the tree itself (a loop, EACCES): bugs propagate
            status, detail = SourceStatus.FAILED, _describe(exc)
            problems.append(Problem(source=name, subject=name, message=detail,
                                    unknown=tuple(node_fact(a) for a in spec.covers)))
        outcomes.append(SourceOutcome(name=name, status=status, duration_seconds=time.perf_counter() - t0,
                                      detail=detail))
    return Gathered(facts=facts, outcomes=tuple(outcomes), problems=tuple(problems))
