"""``discover``: run the enabled sources against one root and assemble what they read into a Snapshot."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from topology import Problem, Snapshot, SourceStatus, replace

from .access import DiscoveryContext
from .assemble import cross_check, nvml_unread
from .assemble._bounded import bounded
from .assemble._snapshot import assemble
from .sources import Gathered, run_sources, source_table
from .sources.gdr import GdrHostFacts
from .sources.numa import NumaFacts


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
    nvml = None
    if "nvml" in gathered.facts:  # NVML's records load where it read something
        from .sources._nvml_facts import NvmlFacts

        nvml = gathered.get("nvml", NvmlFacts)
    numa = gathered.get("numa", NumaFacts)
    if nvml is None:
        snap = nvml_unread(snap, nvml_allowed=ctx.nvml_allowed)
    else:
        from .assemble._nvml import merge_nvml  # NVML's merge loads where NVML gave facts

        snap = merge_nvml(snap, nvml, numa.driver_gpus if numa is not None else None)
    gdr = gathered.get("gdr", GdrHostFacts)
    return settle(bounded(cross_check(snap, module_version=gdr.module_version if gdr is not None else None)))


def settle(snap: Snapshot) -> Snapshot:
    """A source that read its subsystem but left some facts unknown is ``partial``, not ``ok``."""
    partial = {p.source for p in snap.problems if p.unknown}
    outcomes = tuple(replace(o, status=SourceStatus.PARTIAL)
                     if o.status is SourceStatus.OK and o.name in partial else o for o in snap.sources)
    return replace(snap, sources=outcomes)


def _node_name(ctx: DiscoveryContext) -> tuple[str, Problem | None]:
    if ctx.node_name:
        return ctx.node_name, None
    try:
        name = ctx.root.attr("/proc/sys/kernel/hostname")
    except OSError:
        name = None
    if name and len(name) <= 253 and name.isprintable() and " " not in name:
        return name, None
    if name:
        return "unknown", Problem(source="discover", subject="node",
                                  message=f"/proc/sys/kernel/hostname is not a host name: {name[:40]!r}")
    if ctx.live:
        return os.uname().nodename, None  # gethostname(2) is uname's nodename on Linux
    return "unknown", Problem(source="discover", subject="node", message="no /proc/sys/kernel/hostname in the tree")
