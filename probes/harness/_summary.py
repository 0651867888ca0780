"""A collective's cells and summaries, pure: how each cell was timed, and the peak and nccl-tests' "Avg bus
bandwidth" taken over the cells of one timing mode only.

An NCCL cell (one size, out of place or in place) is timed either as CUDA graph launches (nccl-tests
``-G``) or as operations issued on the stream (nccl-tests ``-G 0``); once a capture is refused the rest of
the item is timed on the stream, so one sweep can hold both. Each cell says its own mode, recorded when it
was timed; a summary mixing the two would answer to no nccl-tests command line, so it is taken over the
mode most cells have (the one the plan asked for on a tie) and says which, and how many cells it left out.
A cell whose samples were timed in two ways (``mixed``) joins no summary. gloo's cells carry no mode: its
summaries take every cell, as before.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from topology import Measurement, replace

from ..core import RawRow

MIXED = "mixed"
TEXT = "timing_"  # the raw conditions that describe each mode: timing_graph, timing_stream
_WORDS = {"graph": "as CUDA graph launches", "stream": "on the stream, operation by operation"}


def _mode(m: Measurement) -> str:
    return dict(m.conditions).get("mode", "")


def timing_mode(m: Measurement) -> str:
    return dict(m.conditions).get("timing_mode", "")


def item_conditions(conditions: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The item's conditions without the per-mode descriptions (each cell takes the one of its mode)."""
    texts = {TEXT + mode for mode in _WORDS}
    return tuple((k, v) for k, v in conditions if k not in texts)


def cell_timing(row: RawRow, channel: int, conditions: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """``timing_mode`` and ``timing`` of one cell, from how each of its samples was timed."""
    if not row.timing:
        return ()
    texts = dict(conditions)
    modes = [sample[channel] for sample in row.timing]
    found = sorted(set(modes))
    if len(found) == 1:
        return ("timing_mode", found[0]), ("timing", texts.get(TEXT + found[0], found[0]))
    counts = ", ".join(f"{m} in {modes.count(m)} sample(s)" for m in found)
    return ("timing_mode", MIXED), ("timing", f"this cell's samples were timed in more than one way ({counts}); "
                                              "it joins no summary")


def peak(sweep: Sequence[Measurement]) -> tuple[Measurement, ...]:
    """The busbw cell with the highest median over sizes and modes, and the algbw of the same cell."""
    bus = [m for m in sweep if m.direction == "busbw"]
    if not bus:
        return ()
    best = max(bus, key=lambda m: m.value)
    alg = [m for m in sweep if m.direction == "algbw" and m.size_bytes == best.size_bytes and _mode(m) == _mode(best)]
    return (best, *alg[:1])


def average_bus_bandwidth(sweep: Sequence[Measurement]) -> tuple[Measurement, ...]:
    """nccl-tests' "Avg bus bandwidth": the mean busbw over every cell given (all sizes, out of place and in
    place). It depends on the sizes swept; it is not a peak."""
    bus = [m for m in sweep if m.direction == "busbw"]
    if not bus:
        return ()
    first = bus[0]
    sizes = [m.size_bytes or 0 for m in bus]
    how = (f"nccl-tests' Avg bus bandwidth: mean busbw of {len(bus)} cells "
           f"({', '.join(sorted({_mode(m) for m in bus}))}; {min(sizes)} to {max(sizes)} B)")
    kept = tuple((k, v) for k, v in first.conditions if k != "mode")
    average = replace(first, direction="avg_busbw", value=statistics.fmean(m.value for m in bus),
                                  size_bytes=None, stats=None, conditions=(*kept, ("average", how)))
    return (average,)


def summaries(sweep: Sequence[Measurement], asked: str = "") -> tuple[Measurement, ...]:
    """The peak and the average over the cells of one timing mode; each says which mode and what it left
    out when the sweep holds more than one."""
    bus = [m for m in sweep if m.direction == "busbw"]
    modes = Counter(timing_mode(m) for m in bus if timing_mode(m) not in ("", MIXED))
    if not modes:
        return (*peak(sweep), *average_bus_bandwidth(sweep)) if not any(timing_mode(m) for m in bus) else ()
    chosen = max(modes, key=lambda m: (modes[m], m == asked, m))
    cells = [m for m in sweep if timing_mode(m) == chosen]
    left = len(bus) - modes[chosen]
    note = (f"from the {modes[chosen]} busbw cell(s) timed {_WORDS.get(chosen, chosen)}"
            + (f"; {left} cell(s) timed otherwise left out (see each cell's timing_mode)" if left else ""))
    return tuple(replace(m, conditions=(*m.conditions, ("summary", note)))
                 for m in (*peak(cells), *average_bus_bandwidth(cells)))
