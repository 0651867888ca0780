"""``discover``: run the enabled sources against one root and assemble what they read into a Snapshot."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable

from topology import Problem, Snapshot

from ._assemble import assemble
from ._assemble_nvml import merge_nvml
from ._context import DiscoveryContext
from .sources import Gathered, run_sources, source_table
from .sources.nvml import NvmlFacts


def discover(ctx: DiscoveryContext, enabled_sources: Iterable[str] | None = None) -> Snapshot:
    """One discovery pass. ``enabled_sources`` defaults to the table's defaults; an unknown name is a
    ValueError (a usage mistake). What the machine gets wrong becomes problems in the snapshot."""
    table = source_table()
    if enabled_sources is None:
        names = [name for name, spec in table.items() if spec.enabled_by_default]
    else:
        names = list(enabled_sources)
        unknown = sorted(set(names) - table.keys())
        if unknown:
            raise ValueError(f"unknown source(s): {', '.join(unknown)}; known: {', '.join(table)}")
    taken_at = time.time()
    gathered = run_sources(ctx, names)
    node, problem = _node_name(ctx)
    if problem is not None:
        gathered = Gathered(facts=gathered.facts, outcomes=gathered.outcomes,
                            problems=(*gathered.problems, problem))
    snap = assemble(gathered, node=node, taken_at=taken_at)
    nvml = gathered.get("nvml", NvmlFacts)
    return snap if nvml is None else merge_nvml(snap, nvml)


def _node_name(ctx: DiscoveryContext) -> tuple[str, Problem | None]:
    if ctx.node_name:
        return ctx.node_name, None
    try:
        name = ctx.root.attr("/proc/sys/kernel/hostname")
    except OSError:
        name = None
    if name:
        return name, None
    if ctx.live:
        return socket.gethostname(), None
    return "unknown", Problem(source="discover", subject="node", message="no /proc/sys/kernel/hostname in the tree")
