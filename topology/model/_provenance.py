"""Where a fact or a number comes from, and what could not be read: the provenance that every
snapshot carries beside its entities (one outcome per discovery source, problems naming the facts
they leave unknown)."""

from __future__ import annotations

import enum

from ._facts import Fact
from ._record import Record


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


class Problem(Record):
    """Something that could not be read, and why. ``subject`` is an entity id or a source name;
    ``unknown`` the facts it leaves unknown (none: a note, nothing is missing because of it)."""

    __slots__ = __match_args__ = ("source", "subject", "message", "unknown")
    source: str
    subject: str
    message: str
    unknown: tuple[Fact, ...]

    def __init__(self, *, source: str, subject: str, message: str, unknown: tuple[Fact, ...] = ()) -> None:
        self._fill(locals())


class SourceOutcome(Record):
    """How one discovery source fared in the pass: its status, how long it took, and a detail."""

    __slots__ = __match_args__ = ("name", "status", "duration_seconds", "detail")
    name: str
    status: SourceStatus
    duration_seconds: float
    detail: str

    def __init__(self, *, name: str, status: SourceStatus, duration_seconds: float, detail: str = "") -> None:
        self._fill(locals())


ESTIMATE = "estimate"  # the source of a number the cost model or the fabric states itself (a stated default)
