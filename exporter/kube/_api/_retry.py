"""Bounded exponential backoff with full jitter, honouring ``Retry-After``; the failure is reported, not raised
past the sink."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")
RETRYABLE = frozenset({409, 429, 500, 502, 503, 504})


class Retryable(Exception):  # a signal between the client and Backoff.run
    def __init__(self, error: Exception, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error, self.retry_after = error, retry_after


@dataclass(slots=True, kw_only=True)
class Backoff:
    attempts: int = 4
    base: float = 0.25
    cap: float = 8.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.cap)
        return self.rng.uniform(0, min(self.cap, self.base * 2**attempt))

    def run(self, call: Callable[[], T]) -> T:
        """``call`` raises :class:`Retryable` for a failure worth another try; the last one is re-raised."""
        for attempt in range(self.attempts):
            try:
                return call()
            except Retryable as exc:
                if attempt == self.attempts - 1:
                    raise exc.error from exc
                self.sleep(self.delay(attempt, exc.retry_after))
        raise AssertionError("unreachable")


def retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
