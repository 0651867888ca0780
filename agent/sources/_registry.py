"""One table of discovery sources, one per subsystem, each with a default state (node_exporter style).

A source is a function ``(DiscoveryContext) -> facts``: a frozen record of what it read, never model
entities. It raises :class:`SubsystemAbsent` when its subsystem is not on this node and
:class:`SourceError` when it is there but unreadable; problems with single devices go into its facts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from topology import Problem, SourceOutcome, SourceStatus, TopolinkError

from .._context import DiscoveryContext

T = TypeVar("T")


class SourceError(TopolinkError):
    """A source's whole subsystem could not be read."""


class SubsystemAbsent(SourceError):
    """The subsystem is not on this node (no driver, no InfiniBand): not a failure."""


@dataclass(frozen=True, slots=True)
class SourceSpec:
    name: str
    read: Callable[[DiscoveryContext], Any]
    enabled_by_default: bool
    help: str


_SOURCES: dict[str, SourceSpec] = {}


Reader = Callable[[DiscoveryContext], T]


def register(name: str, *, default: bool = True, help: str) -> Callable[[Reader[T]], Reader[T]]:
    """Add a source to the table under ``name``; ``default`` is whether it runs without a flag."""

    def wrap(fn: Reader[T]) -> Reader[T]:
        if name in _SOURCES:
            raise ValueError(f"source {name!r} registered twice")
        _SOURCES[name] = SourceSpec(name, fn, default, help)
        return fn

    return wrap


def source_table() -> Mapping[str, SourceSpec]:
    return dict(sorted(_SOURCES.items()))


@dataclass(frozen=True, slots=True)
class Gathered:
    """Every enabled source's facts (absent or failed ones are missing) and outcomes."""

    facts: Mapping[str, Any]
    outcomes: tuple[SourceOutcome, ...]
    problems: tuple[Problem, ...]

    def get(self, name: str, kind: type[T]) -> T | None:
        value = self.facts.get(name)
        return value if isinstance(value, kind) else None


def run_sources(ctx: DiscoveryContext, enabled: Iterable[str]) -> Gathered:
    facts: dict[str, Any] = {}
    outcomes: list[SourceOutcome] = []
    problems: list[Problem] = []
    for name in sorted(set(enabled)):
        spec = _SOURCES[name]
        t0 = time.perf_counter()
        detail = ""
        try:
            facts[name] = spec.read(ctx)
            status = SourceStatus.OK
        except SubsystemAbsent as exc:
            status, detail = SourceStatus.ABSENT, str(exc)
        except TopolinkError as exc:  # ours only: real bugs propagate and fail tests
            status, detail = SourceStatus.FAILED, str(exc)
            problems.append(Problem(source=name, subject=name, message=detail))
        outcomes.append(SourceOutcome(name=name, status=status, duration_seconds=time.perf_counter() - t0,
                                      detail=detail))
    return Gathered(facts=facts, outcomes=tuple(outcomes), problems=tuple(problems))
