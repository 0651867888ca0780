"""The fleet controller's sync at fleet scale, in process (no API server): the time to compute everything a
fleet wants (claim classes from the store, every part) for N nodes, and the sync's writes when nothing changed
and when one node changed class. The saved GB200-racks fleet (tests/data/fleet) repeated under new names and
NVLink domains. Measured on this machine; the 10 s bound of the issue is for the whole path with the real API
server, which this does not measure.

    .venv/bin/python benchmarks/controller.py [--nodes 10000]

With ``--apiserver`` (needs $KUBEBUILDER_ASSETS: etcd and kube-apiserver), the whole path on a real API server
of its own: N fake Nodes and their slices, the controller leading in process, and the time from one node's
labels patched to its objects reflecting it, and from a node moved to a claim class no node had to that class's
ResourceClaimTemplates made (and back: deleted) (``benchmarks._controller_apiserver``).

    KUBEBUILDER_ASSETS=... .venv/bin/python benchmarks/controller.py --apiserver --nodes 10000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script, it reads the test fleet and tests/kube_memory.py

from exporter.kube import Parts, wanted  # noqa: E402
from exporter.kube._controller._sync import sync  # noqa: E402
from exporter.kube._fleet._claims_read import claim_classes  # noqa: E402
from tests.kube_memory import MemoryApi  # noqa: E402

FLEET = REPO / "tests" / "data" / "fleet" / "gb200-racks-topograph.json"
P = "gpu.topology"
NS = {"resourceclaimtemplates": "default", "configmaps": "default"}  # where the namespaced kinds go


def fleet(n: int) -> tuple[dict[str, dict[str, str]], dict[str, list[dict[str, Any]]]]:
    items = json.loads(FLEET.read_text())["items"]
    base = [o for o in items if o["kind"] == "Node" and f"{P}/gpu.count" in o["metadata"]["labels"]]
    slices = {o["spec"]["nodeName"]: [o] for o in items if o["kind"] == "ResourceSlice"}
    nodes: dict[str, dict[str, str]] = {}
    by_node: dict[str, list[dict[str, Any]]] = {}
    for i in range(n):
        src = base[i % len(base)]
        name = f"n{i:05d}-{src['metadata']['name']}"
        labels = dict(src["metadata"]["labels"]) | {"kubernetes.io/hostname": name}
        labels[f"{P}/nvlink-domain"] = f"{labels[f'{P}/nvlink-domain']}-{i // 36}"  # racks of 36 nodes
        nodes[name] = labels
        by_node[name] = [o | {"spec": o["spec"] | {"nodeName": name}} for o in slices[src["metadata"]["name"]]]
    return nodes, by_node


def lost_gpu(slices: list[dict[str, Any]], driver: str = P) -> tuple[list[dict[str, Any]], str]:
    """The node's slices with its first GPU gone (fallen off the bus), and the claim class they make: for the
    GB200 trays, a class no node of the saved fleet has (its DeviceClass and templates are new)."""
    from exporter._core._claim_groups import claim_groups
    from exporter.kube._desired._claim_places import places_from_devices

    gpu = next(d["name"] for s in slices for d in s["spec"]["devices"] if d["name"].startswith("gpu-"))
    fewer = [s | {"spec": s["spec"] | {"devices": [d for d in s["spec"]["devices"] if d["name"] != gpu]}}
             for s in slices]
    return fewer, claim_groups(places_from_devices([d for s in fewer for d in s["spec"]["devices"]], driver)).class_id


def compute(nodes: dict[str, dict[str, str]], by_node: dict[str, list[dict[str, Any]]]) -> Any:
    members: dict[str, list[str]] = {}
    for name, labels in nodes.items():
        members.setdefault(labels[f"{P}/claim-class"], []).append(name)
    read = claim_classes(members, lambda n: by_node.get(n, []), P)
    return wanted(nodes, read.classes, Parts(gpus=(2, 4, 8)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--apiserver", action="store_true", help="the whole path, on a real kube-apiserver")
    ap.add_argument("--changes", type=int, default=5, help="with --apiserver: label patches measured")
    ap.add_argument("--class-changes", type=int, default=3,
                    help="with --apiserver: moves of a node to a class no node had, and back, measured")
    args = ap.parse_args()
    if args.apiserver:
        return on_apiserver(args.nodes, args.changes, args.class_changes)
    nodes, by_node = fleet(args.nodes)
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        made = compute(nodes, by_node)
        times.append(time.perf_counter() - start)
    api = MemoryApi()
    parts = ["claims", "kueue", "kai", "volcano", "slurm"]
    first = sync(api, made.objects, parts, NS)
    api.writes.clear()
    again = sync(api, made.objects, parts, NS)
    quiet = len(api.writes)
    moved = next(iter(nodes))
    nodes[moved] = dict(nodes[moved]) | {f"{P}/nvlink-domain": "elsewhere"}
    api.writes.clear()
    sync(api, compute(nodes, by_node).objects, parts, NS)
    print(f"| nodes | objects | compute median (s, measured) | first sync writes | unchanged sync writes | "
          f"one node moved: writes |\n|---|---|---|---|---|---|\n| {args.nodes} | {len(made.objects)} | "
          f"{statistics.median(times):.3f} | {len(first.applied)} | {quiet} (unchanged {again.unchanged}) | "
          f"{len(api.writes)} |")
    return 0


def on_apiserver(nodes: int, changes: int, classes: int) -> int:
    import tempfile
    from contextlib import contextmanager

    from benchmarks._controller_apiserver import run
    from tests.apiserver import assets, running

    found = assets()
    if found is None:
        print("benchmarks.controller --apiserver: set KUBEBUILDER_ASSETS to a folder with etcd and kube-apiserver",
              file=sys.stderr)
        return 2
    with (tempfile.TemporaryDirectory() as root, contextmanager(running)(found, Path(root) / "server") as server,
          server.admin() as http):
        print(run(http, server.kubeconfig(), tag="bench", nodes=nodes, changes=changes, classes=classes).table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
