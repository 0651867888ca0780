"""Times a document carries are checked against this machine's clock: a snapshot, a probe report or a
measurement dated later than now, by more than the clock skew two machines may have, was not taken yet.
It is refused with its field and time, so nothing dated in the future is loaded or published (a staleness
alert on a timestamp years ahead could never fire)."""

from __future__ import annotations

import time

from ._errors import SchemaError

# Two machines' clocks under NTP agree within milliseconds; five minutes covers a node whose time sync is
# late after a boot, and is far below any time a probe's measurement stays fresh.
MAX_CLOCK_SKEW_S = 300.0


def _utc(seconds: float) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
    except (OverflowError, OSError, ValueError):
        return "beyond any calendar"


def not_ahead(where: str, when: float | None, now: float) -> None:
    """Raises :class:`SchemaError` naming ``where`` when ``when`` is more than the skew after ``now``."""
    if when is not None and when > now + MAX_CLOCK_SKEW_S:
        raise SchemaError(f"{where}: {when:.0f} ({_utc(when)}) is in the future: more than {MAX_CLOCK_SKEW_S:.0f} s "
                          f"after this machine's clock ({_utc(now)})")
