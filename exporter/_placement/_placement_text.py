"""The placement document (:mod:`._placement`) as a table for people, and its short forms for the page.

Every number printed is the cost model's estimate and the table says so in its title; each row counts its
inputs by source (measured, theoretical, estimate: a stated default), so a reader sees at once whether a
measurement stands behind it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from topology import shown, shown_text

from ._placement import human_size

_BDF = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]")


def gbps(v: float | None) -> str:
    return "unknown" if v is None else f"{v / 1e9:.0f} GB/s" if v >= 10e9 else f"{v / 1e9:.1f} GB/s"


def duration(s: float | None) -> str:
    if s is None:
        return "unknown"
    return f"{s * 1e6:.0f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.2f} s"


def namer(doc: Mapping[str, Any]) -> Any:
    """A function that writes GPU bus ids in a text as ``GPU<index>``, the rest escaped (``topology.shown``)."""
    index = {gid: i for gid, i in (doc.get("gpu_indices") or {}).items() if i is not None}

    def name(text: str) -> str:
        return shown(_BDF.sub(lambda m: f"GPU{index[m.group(0)]}" if m.group(0) in index else m.group(0), text))

    return name


def bottleneck(estimate: Mapping[str, Any], name: Any) -> str:
    neck = estimate.get("bottleneck")
    if not neck:
        return "unknown" if estimate.get("seconds") is None else "-"
    kind = "SMP link" if neck["kind"] == "numa" else neck["kind"].replace("nvlink", "NVLink").replace("pcie", "PCIe")
    src, dst = (neck["a"], neck["b"]) if neck["towards"] == neck["b"] else (neck["b"], neck["a"])
    cap = neck.get("capacity_bytes_per_second")
    shared = f", {neck['flows']:g} flows" if neck.get("flows", 1) > 1.001 else ""
    return f"{kind} {name(src)}->{name(dst)} {gbps(cap)}{shared} ({neck['source']})"


def _above_bottleneck(estimate: Mapping[str, Any]) -> bool:
    """Whether the bus bandwidth shown is above the rate of the bottleneck shown beside it (NVLS)."""
    cap = (estimate.get("bottleneck") or {}).get("capacity_bytes_per_second")
    busbw = estimate.get("busbw_bytes_per_second")
    return cap is not None and busbw is not None and busbw > cap * 1.001


def inputs(estimate: Mapping[str, Any]) -> str:
    counts = {src: len(items) for src, items in (estimate.get("sources") or {}).items()}
    return ", ".join(f"{src} {n}" for src, n in sorted(counts.items())) or "-"


def left_out(doc: Mapping[str, Any]) -> list[str]:
    out = []
    for x in doc.get("left_out") or ():
        who = f"GPU{x['index']}" if x.get("index") is not None else shown(x["gpu"])
        out.append(f"{who} {shown(x['reason'])}" + (f" ({shown_text(x['detail'])})" if x.get("detail") else ""))
    return out


def busy_line(doc: Mapping[str, Any]) -> str:
    busy = doc.get("busy") or {}
    if not busy.get("known"):
        return f"busy GPUs: unknown: {shown_text(busy.get('detail') or 'not asked')}; none left out for being busy"
    name = namer(doc)
    gpus = busy.get("gpus") or {}
    if not gpus:
        return f"busy GPUs: none ({shown_text(busy.get('detail') or 'asked NVML')})"
    listed = ", ".join(name(g) for g in gpus)
    return f"busy GPUs ({shown_text(busy.get('detail') or 'asked NVML')}): {listed}" + \
        (" (left out)" if busy.get("left_out", True) else " (included, as asked)")


def placement_table(doc: Mapping[str, Any]) -> str:
    name = namer(doc)
    gpus_word = "GPU" if doc["gpus"] == 1 else "GPUs"
    lines = [f"Best groups of {doc['gpus']} {gpus_word} on {shown(doc['node'])} for {doc['collective']} of "
             f"{human_size(int(doc['size_bytes']))}: estimates of the cost model, not measurements", ""]
    rows = [("rank", "GPUs", "est. time", "est. busbw", "algorithm", "bottleneck", "inputs by source")]
    for g in doc["groups"]:
        e = g["estimate"]
        gpus = " ".join(str(i) if i is not None else name(gid) for gid, i in zip(g["gpus"], g["indices"], strict=True))
        rows.append((str(g["rank"]), gpus, duration(e["seconds"]), gbps(e["busbw_bytes_per_second"]), e["algorithm"],
                     bottleneck(e, name), inputs(e)))
    if len(rows) > 1:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    else:
        lines.append(f"No group of {doc['gpus']} GPUs: {shown_text(doc.get('note') or 'none available')}.")
    if any(_above_bottleneck(g["estimate"]) for g in doc["groups"]):
        lines.append("est. busbw above the bottleneck's rate: through NVSwitches each GPU's traffic is split over its "
                     "links to every switch; the bottleneck is the one of those links that fills first")
    lines.append("")
    out = left_out(doc)
    lines.append("left out: " + ("; ".join(out) if out else "none"))
    lines.append(busy_line(doc))
    unknown = sorted({u for g in doc["groups"] for u in g["estimate"].get("unknown") or ()})
    if unknown:
        lines.append("unknown (the estimate could not use): " + ", ".join(name(u) for u in unknown))
    if not (doc.get("snapshot") or {}).get("complete", True):
        lines.append("snapshot: incomplete (some facts unknown; standard error lists them)")
    search = "every group evaluated" if doc["exhaustive"] else \
        "proven best by a bound" if doc["optimal"] else "best found, not proven"
    groups_word = "group" if doc["evaluated"] == 1 else "groups"
    lines.append(f"search: {doc['evaluated']} {groups_word} evaluated, {search}" +
                 (f"; {shown_text(doc['note'])}" if doc.get("note") and doc["groups"] else ""))
    return "\n".join(lines) + "\n"


def best_groups_table(docs: list[Mapping[str, Any]] | tuple[Mapping[str, Any], ...] | Any) -> str:
    """The page's section: the best group of each size, one row each (HTML)."""
    from html import escape

    rows = []
    for doc in docs:
        name = namer(doc)
        if not doc["groups"]:
            rows.append((str(doc["gpus"]), "none", "-", "-", "-", escape(shown_text(doc.get("note") or ""))))
            continue
        g, e = doc["groups"][0], doc["groups"][0]["estimate"]
        gpus = ", ".join(f"GPU{i}" if i is not None else name(x) for x, i in zip(g["gpus"], g["indices"], strict=True))
        rows.append((str(doc["gpus"]), escape(gpus), gbps(e["busbw_bytes_per_second"]), duration(e["seconds"]),
                     escape(f"{e['algorithm']}; {bottleneck(e, name)}"), escape(inputs(e))))
    if not rows:
        return "<p>No group of 2 or more GPUs on this node.</p>"
    size = human_size(int(docs[0]["size_bytes"]))
    head = ("GPUs", "best group", "est. bus bandwidth", f"est. time, all-reduce of {size}", "algorithm; bottleneck",
            "inputs by source")
    table = "<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>" + "".join(
        "<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows) + "</table>"
    return (f"<p>Estimates of the cost model (measured rates where probes timed them, else theoretical ones), "
            f"never measurements. {escape(busy_line(docs[0]))}. More: <code>GET /v1/placement?gpus=N</code>.</p>"
            + table)
