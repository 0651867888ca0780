"""A small fleet as the agents publish it, for the ``topolink cluster`` tests: the labels and ResourceSlices the
real sinks compute for machine profiles (GB200 trays of one NVL72 rack, HGX H100 nodes), under node names
of their own, and a fake list API that pages them as a kube-apiserver does (``limit``/``continue``)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import topology as t
from exporter.kube import Expired, LabelConfig, SliceConfig, build_slices, desired_devices, desired_labels
from tests.kube_support import discover_profile
from topology import replace

Obj = dict[str, Any]
P = "gpu.topology"


@dataclasses.dataclass
class Fleet:
    nodes: list[Obj]  # Node objects with labels
    slices: list[Obj]  # ResourceSlices (v1)


def fleet(workdir: Path, *, trays: int = 18, hgx: int = 2, slow_tray: int | None = 17, prefix: str = P) -> Fleet:
    """``trays`` GB200 compute trays of one rack (the profile's fabric clique), ``hgx`` HGX H100 nodes;
    ``slow_tray``'s labels say its best 4 GPUs estimate a class lower (as after a link fault). ``prefix`` is
    the label prefix and the slices' driver (a server shared with other tests: a fleet of its own)."""
    tray = discover_profile("gb200-tray", workdir / "tray")
    box = discover_profile("hgx-h100", workdir / "hgx")
    nodes, slices = [], []
    for name, snap in [*((f"tray-{i:02d}", tray) for i in range(trays)), *((f"hgx-{i}", box) for i in range(hgx))]:
        named = replace(snap, node=name)
        labels = desired_labels(named, LabelConfig(prefix=prefix), {})
        if name == f"tray-{slow_tray:02d}" if slow_tray is not None else False:
            labels[f"{prefix}/allreduce-busbw-4"] = str(int(labels[f"{prefix}/allreduce-busbw-4"]) // 2)
        labels |= {"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "gpu"}
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
        cfg = SliceConfig(driver=prefix)
        slices += build_slices(desired_devices(named, cfg), node=name, node_uid=f"uid-{name}", cfg=cfg,
                               version="v1", generation=1)
    plain = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-0", "labels": {"kubernetes.io/os": "linux"}}}
    return Fleet(nodes=[plain, *nodes], slices=slices)


class PagedApi:
    """Lists as the API server pages them: ``limit`` items a page and an opaque ``continue``; ``expire`` makes
    the n-th request with a continue token answer 410 Gone. Records every request."""

    def __init__(self, fleet: Fleet, *, expire: Sequence[int] = ()) -> None:
        self.fleet, self.expire = fleet, set(expire)
        self.requests: list[tuple[str, dict[str, str], str | None]] = []
        self._continued = 0

    def served_versions(self, group: str) -> Sequence[str]:
        return ["v1", "v1beta2"] if group == "resource.k8s.io" else []

    def get_page(self, path: str, params: Mapping[str, str], accept: str | None = None) -> bytes:
        self.requests.append((path, dict(params), accept))
        if "continue" in params:
            self._continued += 1
            if self._continued in self.expire:
                raise Expired(f"GET {path}: 410 the continue token has expired")
        if path == "/api/v1/nodes":
            key = params["labelSelector"]
            items = [n for n in self.fleet.nodes if key in n["metadata"]["labels"]]
        else:
            driver = params["fieldSelector"].removeprefix("spec.driver=")
            items = [s for s in self.fleet.slices if s["spec"]["driver"] == driver]
        start, limit = int(params.get("continue") or 0), int(params["limit"])
        rest = start + limit < len(items)
        page = {"items": items[start:start + limit], "metadata": {"continue": str(start + limit) if rest else ""}}
        return json.dumps(page).encode()


def summaries_by_node(summaries: Sequence[t.NodeSummary]) -> dict[str, t.NodeSummary]:
    return {s.node: s for s in summaries}


SAVED = Path(__file__).resolve().parent / "data" / "fleet" / "gb200-rack-and-hgx.json"


def kubectl_list(fleet: Fleet) -> Obj:
    """The fleet as ``kubectl get nodes,resourceslices -o json`` prints it: one ``List`` of both kinds."""
    return {"apiVersion": "v1", "kind": "List", "items": [*fleet.nodes, *fleet.slices],
            "metadata": {"resourceVersion": ""}}


def write_saved(path: Path = SAVED) -> Path:
    """Write the saved fleet the docs' ``topolink cluster --from`` examples read (the one command that makes it):
    ``python -m tests.cluster_support``."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="topolink-fleet-") as tmp:
        doc = kubectl_list(fleet(Path(tmp)))
    path.parent.mkdir(parents=True, exist_ok=True)
    items = ",\n".join(json.dumps(item, sort_keys=True, separators=(",", ":")) for item in doc["items"])
    path.write_text('{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[\n' + items + "\n]}\n")
    return path


if __name__ == "__main__":
    print(write_saved())
