"""A fleet for the schedulers' emitters (``topolink cluster --emit``): GB200 trays with NVML platform info in three
NVL racks (the profile's NVLink domain and rack, and two more as other racks would report them), HGX H100 nodes,
a tray whose fabric reports degraded bandwidth, and nodes without GPUs; every GPU node also carries the fabric
labels Topograph (v1.0 and later) puts on nodes (``fabric.topograph.run/tier-0``, the leaf switch, and ``tier-1``, the
spine: tier 0 nearest the node), which the agent does not write.

``python -m tests.scheduler_fleet`` writes ``tests/data/fleet/gb200-racks-topograph.json``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import topology as t
from exporter.kube import LabelConfig, SliceConfig, build_slices, desired_devices, desired_labels
from tests.cluster_support import Fleet, P, kubectl_list
from tests.kube_support import discover_profile
from topology import replace

SAVED = Path(__file__).resolve().parent / "data" / "fleet" / "gb200-racks-topograph.json"
LEAF, SPINE = "fabric.topograph.run/tier-0", "fabric.topograph.run/tier-1"
RACKS = 3  # of TRAYS trays each; racks 0 and 1 under leaf-1, rack 2 under leaf-2, the HGX nodes under leaf-3
TRAYS = 3


def _node(name: str, snap: t.Snapshot, extra: dict[str, str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    named = replace(snap, node=name)
    labels = desired_labels(named, LabelConfig(prefix=P), {}) | {"kubernetes.io/hostname": name} | extra
    cfg = SliceConfig(driver=P)
    slices = build_slices(desired_devices(named, cfg), node=name, node_uid=f"uid-{name}", cfg=cfg, version="v1",
                          generation=1)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}, slices


def scheduler_fleet(workdir: Path) -> Fleet:
    """RACKS x TRAYS GB200 trays (profile ``gb200-tray-rack``; the last tray ``gb200-tray-degraded-bw``, its fabric
    reporting degraded bandwidth), two HGX H100 nodes and two nodes without GPUs. Racks after the first are the
    profile's tray with another rack's identity: another fabric cluster UUID and chassis serial."""
    tray = discover_profile("gb200-tray-rack", workdir / "tray")
    degraded = discover_profile("gb200-tray-degraded-bw", workdir / "degraded")
    box = discover_profile("hgx-h100", workdir / "hgx")
    nodes, slices = [], []
    for i in range(RACKS * TRAYS):
        rack = i // TRAYS
        node, own = _node(f"tray-{i:02d}", degraded if i == RACKS * TRAYS - 1 else tray,
                          {LEAF: "leaf-1" if rack < 2 else "leaf-2", SPINE: "spine-1"})
        labels = node["metadata"]["labels"]
        if rack:
            domain = labels[f"{P}/nvlink-domain"]
            labels[f"{P}/nvlink-domain"] = f"{domain[:-14]}{rack:012d}.1"
            labels[f"{P}/rack"] = f"{labels[f'{P}/rack'][:-3]}{123 + rack}"
        nodes.append(node)
        slices += own
    for i in range(2):
        node, own = _node(f"hgx-{i}", box, {LEAF: "leaf-3", SPINE: "spine-1"})
        nodes.append(node)
        slices += own
    for i in range(2):
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"cpu-{i}", "labels": {
            "kubernetes.io/os": "linux", "kubernetes.io/hostname": f"cpu-{i}"}}})
    return Fleet(nodes=nodes, slices=slices)


def write_saved(path: Path = SAVED) -> Path:
    with tempfile.TemporaryDirectory(prefix="topolink-fleet-") as tmp:
        doc = kubectl_list(scheduler_fleet(Path(tmp)))
    items = ",\n".join(json.dumps(item, sort_keys=True, separators=(",", ":")) for item in doc["items"])
    path.write_text('{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[\n' + items + "\n]}\n")
    return path


if __name__ == "__main__":
    print(write_saved())
