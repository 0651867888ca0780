"""``nvlink-count``: where NVML's per-link calls ended against its own link-count field (91). Pure.

The per-link calls end at the first link NVML calls INVALID_ARGUMENT (past the last) or, at link 0,
NOT_SUPPORTED (no NVLink). When field 91 says the GPU has more links than that, the end was an error in
the middle of the range, not the last link: the GPU's NVLinks are unknown, never the links before it alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from topology import Problem

from ..sources.nvml import NvmlFacts
from ._witness import witness


def link_ends(facts: NvmlFacts, placed: Mapping[int, str]) -> list[Problem]:
    row = witness("nvlink-count")
    out = []
    for g in facts.gpus:
        bus = placed.get(g.index)
        if bus is None or g.lost or g.nvlink_count is None or g.links_end is None:
            continue
        if g.links_end != g.nvlink_count:
            out.append(row.dispute((bus,), f"{g.nvlink_count} links", f"links end at link {g.links_end}"))
    return out
