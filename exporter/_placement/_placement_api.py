"""``GET /v1/placement``: the placement document of the served snapshot, and the page's best groups.

Answers are cached per view generation and query (:data:`CACHED` of them, least recently used first out),
so a planner that asks the same question every few seconds costs one search per snapshot. A search runs in
the thread pool, never on the event loop, one at a time (the largest, 16 of 72 GPUs, takes tens of
milliseconds); a request that waits longer than :data:`WAIT_S` for its turn gets 503 with Retry-After
instead of piling up threads.

The agent does not ask NVML which GPUs are busy per request (an NVML session costs milliseconds and the
answer is stale a moment later): the document says busy is unknown, and ``topolink place`` on the node
asks.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from topology import PlacementError

from .._core._view import View
from ._placement import BusyInfo, PlacementQuery, QueryError, placement_answer, query_from_params

CACHED = 64
WAIT_S = 5.0
PAGE_SIZES = (2, 4, 8)
SERVED_BUSY = BusyInfo(known=False, detail="the agent answers from its served snapshot and does not ask NVML "
                                           "per request; topolink place on the node does")


class Busy(Exception):
    """Another search held the searcher longer than :data:`WAIT_S`."""


class PlacementCache:
    def __init__(self, entries: int = CACHED) -> None:
        self._entries = entries
        self._lock = threading.Lock()
        self._search = threading.Lock()
        self._gen = -1
        self._answers: OrderedDict[PlacementQuery, dict[str, Any] | PlacementError] = OrderedDict()

    def _cached(self, view: View, query: PlacementQuery) -> dict[str, Any] | PlacementError | None:
        with self._lock:
            if view.generation != self._gen:
                self._gen, self._answers = view.generation, OrderedDict()
            found = self._answers.get(query)
            if found is not None:
                self._answers.move_to_end(query)
            return found

    def answer(self, view: View, query: PlacementQuery) -> dict[str, Any]:
        """Blocking: call it from a worker thread. Raises PlacementError for an exclude naming no GPU, and
        :class:`Busy` when the searcher stays taken."""
        found = self._cached(view, query)
        if found is None:
            if not self._search.acquire(timeout=WAIT_S):
                raise Busy()
            try:
                found = self._cached(view, query)  # the request it waited for may have asked the same
                if found is None:
                    try:
                        found = placement_answer(view.snapshot, query, SERVED_BUSY)
                    except PlacementError as exc:
                        found = exc
                    with self._lock:
                        if view.generation == self._gen:
                            self._answers[query] = found
                            while len(self._answers) > self._entries:
                                self._answers.popitem(last=False)
            finally:
                self._search.release()
        if isinstance(found, PlacementError):
            raise found
        return found

    def page_groups(self, view: View) -> list[dict[str, Any]]:
        """The best group of 2, 4 and 8 GPUs (the sizes the node can host) for the page."""
        n, out = len(view.snapshot.gpus), []
        for k in PAGE_SIZES:
            if k <= n:
                try:
                    out.append(self.answer(view, PlacementQuery(gpus=k)))  # the API's default: shared
                except Busy:  # the page still renders; the section says which sizes are missing
                    continue
        return out


def placement_reply(cache: PlacementCache, view: View,
                    params: Mapping[str, str]) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The answer to ``GET /v1/placement?params``: status, JSON document and headers. Blocking (the search):
    call it from a worker thread."""
    try:
        query = query_from_params(dict(params))
    except QueryError as exc:
        return 400, {"detail": str(exc)}, {}
    try:
        return 200, cache.answer(view, query), {}
    except PlacementError as exc:
        return 400, {"detail": f"exclude: {exc}"}, {}
    except Busy:
        return 503, {"detail": "another placement search is running; try again"}, {"Retry-After": "1"}
