"""``topolink cluster --groups``: per claim class, how many groups of each kind and size exist on each of its
nodes (how many are free is the scheduler's to know, not topolink's), as JSON and as a table."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..._core._claim_groups import Group
from ._claims_read import ClaimRead


def _sizes(groups: tuple[Group, ...]) -> dict[str, int]:
    return {str(size): count for size, count in sorted(Counter(len(g.buses) for g in groups).items(), reverse=True)}


def claim_classes_document(read: ClaimRead) -> dict[str, Any]:
    return {"classes": [{"class": c.id, "nodes": list(c.nodes), "gpus": c.groups.gpus,
                         "nvlink_islands": _sizes(c.groups.islands), "pcie_switches": _sizes(c.groups.switches),
                         "gpu_nic_pairs": len(c.groups.pairs),
                         "islands": [{"gpus": list(g.devices), "buses": list(g.buses),
                                      "nvlink_bytes_per_second": g.bytes_per_second, "source": "theoretical"}
                                     for g in c.groups.islands]}
                        for c in read.classes],
            "problems": list(read.problems)}


def _shown(sizes: dict[str, int]) -> str:
    return ", ".join(f"{count} of {size}" for size, count in sizes.items()) or "none"


def claim_classes_table(doc: dict[str, Any]) -> str:
    lines = ["", "Claim classes (nodes whose GPUs make the same groups of the same bus ids; groups per node, "
                 "free or not):"]
    rows = [("class", "nodes", "GPUs", "NVLink islands", "under one PCIe switch", "GPU+NIC pairs")]
    rows += [(c["class"], str(len(c["nodes"])), str(c["gpus"]), _shown(c["nvlink_islands"]),
              _shown(c["pcie_switches"]), str(c["gpu_nic_pairs"])) for c in doc["classes"]]
    if len(rows) == 1:
        lines.append("No node carries a claim-class label.")
    else:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += [f"left out: {p}" for p in doc["problems"]]
    return "\n".join(lines) + "\n"
