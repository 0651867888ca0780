"""``topolink cluster``'s document (JSON) and table: the fleet report of what was read, with where every
number comes from."""

from __future__ import annotations

from typing import Any

from topology import FleetReport

from .._desired._busbw import SIZES
from ._cluster import ClusterRead

SCHEMA = "topolink.cluster/v1"
SOURCES = {"busbw": "estimate: the lower edge of each node's allreduce-busbw-N class (power-of-two GB/s), "
                    "from the cost model on that node",
           "nvlink": "theoretical: the slowest GPU's NVLinks (nvlinkCount x the rate of nvlinkGen) in its slices",
           "nic": "theoretical: the node's RDMA NICs' line rates (rateGbps) added up, from its slices"}


def cluster_document(read: ClusterRead, report: FleetReport) -> dict[str, Any]:
    return {"schema": SCHEMA, "nodes": len(read.summaries), "slices": read.slices, "pages": read.pages,
            "slice_version": read.slice_version, "nodes_without_slices": list(read.without_slices),
            "list_restarts": read.restarts, "from": read.source, "sources": SOURCES, **report.to_dict()}


def _gbs(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e9:.0f}"


def _rows(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def cluster_table(doc: dict[str, Any], *, top: int = 5, outliers: int = 20) -> str:
    where = f"read from {doc['from']}" if doc.get("from") else f"read in {doc['pages']} pages"
    lines = [f"{doc['nodes']} nodes with topolink labels, {doc['slices']} ResourceSlices of ours "
             f"({len(doc['nodes_without_slices'])} nodes without), {where}.",
             "Bus bandwidths are estimates (each node's allreduce-busbw-N class, rounded down to a power of two); "
             "rates between nodes are theoretical line rates.", ""]
    classes = doc["classes"]
    if classes:
        rows = [("NVLink domain", "GPU product", "nodes", "GPUs", *(f"median busbw {n}" for n in SIZES),
                 "outliers")]
        for c in classes:
            rows.append((c["domain"] or "(each node its own)", c["product"], str(c["nodes"]), str(c["gpus"]),
                         *(_gbs(c["medians"].get(str(n))) + (" GB/s" if str(n) in c["medians"] else "")
                           for n in SIZES), str(len(c["outliers"]))))
        lines += _rows(rows)
    else:
        lines.append("No node carries topolink's labels.")
    found = sorted((o | {"class": f"{c['domain'] or '-'} / {c['product']}"} for c in classes for o in c["outliers"]),
                   key=lambda o: (o["ratio"], o["node"]))
    if found:
        lines += ["", f"Outliers (an estimated bus bandwidth under 0.8 of the median of their class's other nodes), "
                      f"{len(found)}:"]
        rows = [("node", "class", "GPUs in group", "busbw", "peers' median", "ratio")]
        rows += [(o["node"], o["class"], str(o["size"]), f"{_gbs(o['busbw_bytes_per_second'])} GB/s",
                  f"{_gbs(o['peer_median_bytes_per_second'])} GB/s", f"{o['ratio']:.2f}") for o in found[:outliers]]
        lines += _rows(rows)
        if len(found) > outliers:
            lines.append(f"... and {len(found) - outliers} more (--format json lists every one)")
    if doc["gpus"] is not None:
        lines += ["", f"Where {doc['gpus']} GPUs fit best:"]
        fits = doc["fits"]
        if not fits:
            lines.append(f"nowhere: no node, NVLink domain or product class holds {doc['gpus']} GPUs")
        else:
            rows = [("kind", "where", "nodes", "busbw", "limited by", "source")]
            for f in fits[:top]:
                nodes = f["nodes"]
                shown = ", ".join(nodes) if len(nodes) <= 4 else f"{', '.join(nodes[:3])}, ... ({len(nodes)})"
                rows.append((f["kind"], f["where"], shown, f"{_gbs(f['busbw_bytes_per_second'])} GB/s", f["limit"],
                             f["source"]))
            lines += _rows(rows)
            if len(fits) > top:
                lines.append(f"... and {len(fits) - top} more places (--top K, or --format json)")
    return "\n".join(lines) + "\n"
