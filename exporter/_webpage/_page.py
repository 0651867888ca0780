"""``/``: one self-contained HTML page of the node for an operator (no script, no external resource).

The node's GPUs grouped by socket, PCIe switch and NVLink island, the pair-bandwidth heat map, the best
groups of 2, 4 and 8 GPUs (estimates), the PCIe tree (Graphviz), the ``topo -m`` matrix, the measured
matrices, measured bandwidth beside the theoretical, the sources, the problems and since when each unknown
fact has been stale.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from topology import TEXT_LIMIT, LinkCapability, Measurement, Snapshot, matrix, shown, shown_text

from .._core._claim_groups import claim_groups, places_of
from .._core._derive import degraded
from .._core._view import ProbeStats, View
from .._placement._placement_text import best_groups_table
from ._heatmap import pair_heatmap
from ._layout import node_picture

_CELL = 4 * TEXT_LIMIT
INLINE_TREE_GPUS = 16  # the Graphviz tree of a 72-GPU NVLink domain is a megabyte of edges: linked, not inlined
_CSS = """body{font-family:sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.1em;
border-bottom:1px solid #ccc;margin-top:1.6em}table{border-collapse:collapse;font-size:.9em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#f3f3f3}pre{background:#f8f8f8;
padding:.6em;overflow-x:auto;font-size:.85em}.bad{color:#b00;font-weight:bold}.ok{color:#070}
.picture svg{max-width:100%;height:auto}"""


def _when(ts: float | None, now: float) -> str:
    if ts is None:
        return "unknown"
    stamp = dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp} ({max(0.0, now - ts):.0f} s ago)"


def _table(head: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    # A cell may quote sysfs, NVML or a snapshot: escaped for display (``topology.shown``), then for HTML. Cells
    # wrap, so the bound is wider than a terminal line's: a long list of unknown facts stays whole.
    body = "".join("<tr>" + "".join(f"<td>{escape(shown(c, _CELL))}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        return "<p>none</p>"
    return "<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>" + body + "</table>"


def _inline(svg: bytes) -> str:
    """The ``<svg>`` element alone: an XML prolog or DOCTYPE has no place inside HTML."""
    text = svg.decode(errors="replace")
    start = text.find("<svg")
    return text[start:] if start >= 0 else ""


def _label(snap: Snapshot, subject: str) -> str:
    gpu = next((g for g in snap.gpus if g.id == subject), None)
    if gpu is not None and gpu.index is not None:
        return f"GPU{gpu.index}"
    return subject


def _claims(snap: Snapshot) -> str:
    """Which GPUs form each group the claim templates of this node's class offer, in their order."""
    groups = claim_groups(places_of(snap))
    index = {g.id: _label(snap, g.id) for g in snap.gpus}
    rows: list[tuple[object, ...]] = []
    for kind, found in (("nvlink", groups.islands), ("switch", groups.switches)):
        for i, g in enumerate(found):
            rate = f"{g.bytes_per_second / 1e9:.0f}" if g.bytes_per_second else "-"
            rows.append((f"topolink-{kind}-N-{groups.class_id} (N up to {len(g.buses)})", f"{kind}-{i}",
                         " ".join(index.get(b, b) for b in g.buses), " ".join(g.buses), rate))
    rows += [(f"topolink-gpu-nic-{groups.class_id}", f"pair-{i}", f"{index.get(p.gpu_bus, p.gpu_bus)} + {p.nic}",
              f"{p.gpu_bus} {p.nic_bus}", f"- ({p.path})") for i, p in enumerate(groups.pairs)]
    return (f"<p>Claim class <code>{escape(groups.class_id)}</code>: pods select it with the node label "
            f"<code>claim-class={escape(groups.class_id)}</code> (docs/claims.md). Groups in the order the "
            "templates offer them, best first:</p>"
            + _table(("template", "subrequest", "GPUs", "bus ids", "NVLink GB/s (theoretical)"), rows))


def page(view: View, *, now: float, svg: bytes | None, svg_reason: str, measured_matrix: str,
         placements: Sequence[Mapping[str, Any]] = ()) -> str:
    snap = view.snapshot
    return "\n".join([
        *_summary(view, now),
        "<h2>GPUs by socket, PCIe switch and NVLink island</h2>", node_picture(snap),
        "<h2>Pair bandwidth, measured against theoretical</h2>", pair_heatmap(snap),
        "<h2>Best GPU groups (estimates)</h2>", best_groups_table(placements),
        "<h2>Claim groups (ResourceClaimTemplates)</h2>", _claims(snap),
        "<details><summary>PCIe tree (Graphviz)</summary>", _tree(snap, svg, svg_reason), "</details>",
        "<h2>GPU and NIC matrix (nvidia-smi topo -m)</h2>",
        f"<pre>{escape(matrix(snap) or 'No GPU or RDMA NIC on this node.')}</pre>",
        *_measurements(view, now, measured_matrix),
        *_health(view, now),
        *_probes(view.probes, now),
        "</body></html>",
    ])


def _summary(view: View, now: float) -> list[str]:
    snap = view.snapshot
    status = '<span class="ok">complete</span>' if snap.complete else \
        '<span class="bad">incomplete: some facts are served from earlier passes</span>'
    return [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>topolink: {escape(shown(snap.node))}</title><style>{_CSS}</style></head><body>",
        f"<h1>topolink: node {escape(shown(snap.node))}</h1>",
        f"<p>Snapshot {status}; discovered {_when(snap.taken_at, now)}; structure hash "
        f"<code>{escape(view.structure_hash[:16])}</code>; {len(snap.gpus)} GPUs, {len(snap.nics)} NICs, "
        f"{len(snap.numa_nodes)} NUMA nodes; topolink {escape(view.version)}.</p>",
    ]


def _tree(snap: Snapshot, svg: bytes | None, svg_reason: str) -> str:
    """The PCIe tree: inlined, linked on a big node, or why there is no picture."""
    if len(snap.gpus) > INLINE_TREE_GPUS:
        return f'<p><a href="/v1/topology.svg">/v1/topology.svg</a> (not inlined above {INLINE_TREE_GPUS} GPUs)</p>'
    if svg is not None:
        return f'<div class="picture">{_inline(svg)}</div>'
    return f'<p class="bad">No picture: {escape(shown_text(svg_reason))}</p>'


def _ratio(m: Measurement, peak: float | None) -> str:
    """Measured over theoretical for a compared profile's figure; a quick figure says it is not compared."""
    if not peak:
        return "N/A"
    if not LinkCapability.compares(m):
        return f"not compared ({dict(m.conditions).get('profile', '')} profile)"
    return f"{m.value / peak:.2f}"


def _measurements(view: View, now: float, measured_matrix: str) -> list[str]:
    """Each bandwidth beside its theoretical peak, the latencies, and the measured matrices."""
    snap = view.snapshot
    rows = []
    for m, peak in zip(snap.measurements, view.theoretical, strict=False):
        if m.unit != "bytes_per_second":
            continue
        who = " ".join(_label(snap, s) for s in m.subjects)
        rows.append((m.test, who, m.direction, m.method, m.source.value, f"{m.value / 1e9:.2f}",
                     f"{peak / 1e9:.2f}" if peak else "N/A", _ratio(m, peak),
                     _when(m.taken_at, now)))
    parts = ["<h2>Measured bandwidth beside theoretical</h2>",
             _table(("test", "between", "direction", "method", "source", "GB/s", "theoretical GB/s",
                     "ratio", "taken"), rows)]
    latencies = [(m.test, " ".join(_label(snap, s) for s in m.subjects), m.direction, f"{m.value * 1e9:.1f}",
                  _when(m.taken_at, now)) for m in snap.measurements if m.unit == "seconds"]
    if latencies:
        parts.append(_table(("test", "between", "direction", "latency ns", "taken"), latencies))
    parts.append(f"<h2>Measured matrices</h2><pre>{escape(measured_matrix)}</pre>")
    return parts


def _health(view: View, now: float) -> list[str]:
    """What is degraded, how each source did, its problems, and the facts served stale."""
    snap = view.snapshot
    return [
        "<h2>Degraded hardware</h2>",
        _table(("subject", "kind", "reason"), degraded(snap)),
        "<h2>Sources</h2>",
        _table(("source", "status", "seconds", "detail"),
               ((o.name, o.status.value, f"{o.duration_seconds:.3f}", o.detail) for o in snap.sources)),
        "<h2>Problems</h2>",
        _table(("source", "subject", "message", "leaves unknown"),
               ((p.source, p.subject, p.message, ", ".join(str(f) for f in p.unknown)) for p in snap.problems)),
        "<h2>Age of facts</h2>",
        f"<p>Every fact not listed here was read by the pass {_when(snap.taken_at, now)}. "
        "These could not be read; the last known value is served, stale since:</p>",
        _table(("fact", "subject", "stale since"),
               ((f.aspect.value, f.subject, _when(since, now)) for f, since in view.stale_since)),
    ]


def _probes(p: ProbeStats, now: float) -> list[str]:
    parts = ["<h2>Probes</h2>",
             f"<p>{'running now; ' if p.running else ''}duty cycle {p.duty_cycle:.4%} "
             f"({p.busy_seconds:.1f} s of probe wall time).</p>",
             _table(("test", "status", "runs"), p.runs),
             _table(("test", "last success"), ((t, _when(w, now)) for t, w in p.last_success))]
    if p.last_reasons:
        parts.append(_table(("test", "between", "why not measured"), p.last_reasons))
    return parts
