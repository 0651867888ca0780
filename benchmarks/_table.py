"""The three-column table (what, value, verdict) the benchmark scripts print."""

from __future__ import annotations

from collections.abc import Sequence


def print_rows(rows: Sequence[tuple[str, str, str]], value_width: int = 24) -> None:
    width = max(len(r[0]) for r in rows)
    for what, value, verdict in rows:
        print(f"{what:<{width}}  {value:>{value_width}}  {verdict}")
