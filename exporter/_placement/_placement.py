"""The answer to "which N GPUs of this node for my job?": one JSON document for ``topolink place --format json``
and ``GET /v1/placement``, and its table for people. Pure: the snapshot and what is known of busy GPUs in,
a document out.

Every figure in it is an estimate of the cost model (``topology.best_groups``), labelled so, with the source
of each input (measured, theoretical or a stated default). Which GPUs are busy is a fact of the moment that
only NVML knows: the caller asks it (or cannot: a saved snapshot, the HTTP API) and says so in
:class:`BusyInfo`; the document carries that answer as given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from topology import PLACEMENT_SIZE_BYTES, Collective, Snapshot, best_groups

from .._core._settings import MAX_SIZE_BYTES, SIZE, SettingError

SCHEMA = "topolink.placement/v1"
MAX_TOP = 16
PARAMS = frozenset({"gpus", "size", "top", "exclude", "collective", "include_busy"})


class QueryError(ValueError):
    """A placement question that cannot be asked as written: the message says which part and why."""


def parse_size(text: str) -> int:
    """``1GiB``, ``256M`` (K, M, G, T alone are binary, as nccl-tests' ``-b``/``-e`` read them), ``1GB``
    (decimal), ``4096``: the settings' size rule, which ``topolink place --size`` reads through too."""
    try:
        value: int = SIZE.parse(text)
    except SettingError as exc:
        raise QueryError(f"size {text!r}: {exc}") from None
    return value


def human_size(n: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementQuery:
    gpus: int
    size_bytes: int = PLACEMENT_SIZE_BYTES
    top: int = 3
    exclude: tuple[str | int, ...] = ()  # NVML indices or GPU bus ids
    collective: Collective = Collective.ALL_REDUCE
    include_busy: bool = False

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise QueryError(f"gpus {self.gpus}: at least 1")
        if not 1 <= self.top <= MAX_TOP:
            raise QueryError(f"top {self.top}: between 1 and {MAX_TOP}")
        if not 1 <= self.size_bytes <= MAX_SIZE_BYTES:
            raise QueryError(f"size {self.size_bytes}: between 1 byte and 1 PiB")


def parse_exclude(items: str) -> tuple[str | int, ...]:
    """``0,3`` or ``0000:18:00.0,5``: NVML indices and bus ids, comma separated."""
    out: list[str | int] = []
    for raw in items.split(","):
        item = raw.strip()
        if item:
            out.append(int(item) if item.isdigit() else item.lower())
    return tuple(out)


def _int(params: Mapping[str, str], name: str, default: int | None) -> int:
    text = params.get(name)
    if text is None:
        if default is None:
            raise QueryError(f"{name} is required (e.g. ?{name}=4)")
        return default
    if not text.strip().isdigit():
        raise QueryError(f"{name} {text!r}: a whole number")
    return int(text)


def query_from_params(params: Mapping[str, str]) -> PlacementQuery:
    """The query of ``GET /v1/placement?gpus=N&size=...&top=K&exclude=...&collective=...&include_busy=1``."""
    unknown = sorted(set(params) - PARAMS)
    if unknown:
        raise QueryError(f"unknown parameter {unknown[0]!r}; known: {', '.join(sorted(PARAMS))}")
    gpus = _int(params, "gpus", None)
    if gpus > 4096:
        raise QueryError(f"gpus {gpus}: at most 4096")
    try:
        collective = Collective(params.get("collective", Collective.ALL_REDUCE.value))
    except ValueError:
        raise QueryError(f"collective {params['collective']!r}: one of "
                         f"{', '.join(c.value for c in Collective)}") from None
    flag = params.get("include_busy", "0").lower()
    if flag not in ("0", "1", "true", "false"):
        raise QueryError(f"include_busy {flag!r}: 0, 1, true or false")
    size = parse_size(params["size"]) if "size" in params else PLACEMENT_SIZE_BYTES
    return PlacementQuery(gpus=gpus, size_bytes=size, top=_int(params, "top", 3),
                          exclude=parse_exclude(params.get("exclude", "")), collective=collective,
                          include_busy=flag in ("1", "true"))


@dataclass(frozen=True, slots=True, kw_only=True)
class BusyInfo:
    """What is known of which GPUs are busy now: ``known`` False when nobody could ask NVML (``detail`` says
    why); else ``gpus`` maps each busy GPU's id to why (compute processes, utilisation)."""

    known: bool
    detail: str = ""
    gpus: Mapping[str, str] = field(default_factory=dict)


def placement_answer(snap: Snapshot, query: PlacementQuery, busy: BusyInfo) -> dict[str, Any]:
    """The document: ``topology.Placement.to_dict()`` plus the schema, what is known of busy GPUs, the GPUs'
    NVML indices and whether the snapshot was complete. Raises ``topology.PlacementError`` for an
    ``exclude`` that names no GPU of the node."""
    busy_now = {} if query.include_busy else dict(busy.gpus)
    placement = best_groups(snap, query.gpus, size_bytes=query.size_bytes, top=query.top, exclude=query.exclude,
                            collective=query.collective, busy=busy_now)
    doc: dict[str, Any] = {"schema": SCHEMA, **placement.to_dict()}
    doc["busy"] = {"known": busy.known, "detail": busy.detail, "left_out": not query.include_busy,
                   "gpus": dict(sorted(busy.gpus.items()))}
    doc["gpu_indices"] = {g.id: g.index for g in snap.gpus}
    doc["snapshot"] = {"complete": snap.complete, "taken_at": snap.taken_at}
    return doc
