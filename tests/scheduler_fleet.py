"""A fleet for the schedulers' emitters (``topolink cluster --emit``): GB200 trays in three NVL racks (the profile's
NVLink domain, and two more as other racks' fabric would report them), HGX H100 nodes, a node whose estimated
bandwidth is degraded, and nodes without GPUs; every GPU node also carries the fabric labels Topograph puts on
nodes (``network.topology.nvidia.com/leaf`` and ``/spine``), which the agent does not write.

``python -m tests.scheduler_fleet`` writes ``tests/data/fleet/gb200-racks-topograph.json``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from tests.cluster_support import Fleet, P, fleet, kubectl_list

SAVED = Path(__file__).resolve().parent / "data" / "fleet" / "gb200-racks-topograph.json"
LEAF, SPINE = "network.topology.nvidia.com/leaf", "network.topology.nvidia.com/spine"
RACKS = 3  # of TRAYS trays each; racks 0 and 1 under leaf-1, rack 2 under leaf-2, the HGX nodes under leaf-3
TRAYS = 3


def scheduler_fleet(workdir: Path) -> Fleet:
    base = fleet(workdir, trays=RACKS * TRAYS, hgx=2, slow_tray=RACKS * TRAYS - 1)
    domain = f"{P}/nvlink-domain"
    first = next(n["metadata"]["labels"][domain] for n in base.nodes if n["metadata"]["name"] == "tray-00")
    cluster = first.rsplit(".", 1)[0]
    nodes = []
    for node in base.nodes:
        name, labels = node["metadata"]["name"], node["metadata"]["labels"]
        if name.startswith("tray-"):
            rack = int(name.removeprefix("tray-")) // TRAYS
            # another rack's fabric: another cluster UUID (its last 12 digits the rack's number)
            labels[domain] = first if rack == 0 else f"{cluster[:-12]}{rack:012d}.1"
            labels |= {LEAF: "leaf-1" if rack < 2 else "leaf-2", SPINE: "spine-1"}
        elif name.startswith("hgx-"):
            labels |= {LEAF: "leaf-3", SPINE: "spine-1"}
        nodes.append(node)
    plain = {"kubernetes.io/os": "linux", "kubernetes.io/hostname": "cpu-1"}
    nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-1", "labels": plain}})
    return Fleet(nodes=nodes, slices=base.slices)


def write_saved(path: Path = SAVED) -> Path:
    with tempfile.TemporaryDirectory(prefix="topolink-fleet-") as tmp:
        doc = kubectl_list(scheduler_fleet(Path(tmp)))
    items = ",\n".join(json.dumps(item, sort_keys=True, separators=(",", ":")) for item in doc["items"])
    path.write_text('{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[\n' + items + "\n]}\n")
    return path


if __name__ == "__main__":
    print(write_saved())
