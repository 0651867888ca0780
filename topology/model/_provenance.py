"""Where a fact or a number comes from, and what could not be read: the provenance that every
snapshot carries beside its entities (one outcome per discovery source, problems naming the facts
they leave unknown)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ._facts import Fact


class Source(enum.StrEnum):
    """Where a number comes from. Only ``measured`` numbers were timed on this node."""

    MEASURED = "measured"
    THEORETICAL = "theoretical"
    SIMULATED = "simulated"


class SourceStatus(enum.StrEnum):
    OK = "ok"
    PARTIAL = "partial"  # the subsystem was read, but some devices or calls were not: see the problems
    ABSENT = "absent"  # the subsystem is not on this node: not an alert
    FAILED = "failed"  # it is there and could not be read
    DISABLED = "disabled"  # turned off (--no-source.NAME): what it reads is unknown


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """Something that could not be read, and why. ``subject`` is an entity id or a source name;
    ``unknown`` the facts it leaves unknown (none: a note, nothing is missing because of it)."""

    source: str
    subject: str
    message: str
    unknown: tuple[Fact, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceOutcome:
    """How one discovery source fared in the pass: its status, how long it took, and a detail."""

    name: str
    status: SourceStatus
    duration_seconds: float
    detail: str = ""


ESTIMATE = "estimate"  # the source of a number the cost model or the fabric states itself (a stated default)
