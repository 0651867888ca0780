"""Fleets shaped as real clusters are, for the schedulers' emitters (``topolink cluster --emit``): node labels as
topolink's agents publish them (``nvlink-domain`` the fabric clique, else ``node_<name>``; ``rack`` the chassis
serial) beside the cloud's or Topograph's own, in the shapes the saved fleet does not have.

  ``cloud``        GKE-length host names (62 characters), the cloud's block and sub-block labels (32-hex values),
                   HGX nodes alone in their NVLink domain, and a GPU node without a product label
  ``same-short``   two levels of one short name (``a.example/block``, ``b.example/block``) both valued ``b0``
  ``racks``        NVL racks of 18, 17, 18 and 9 trays under two leaf switches (Topograph's tier labels)
  ``single``       HGX nodes only: no NVLink domain of two nodes
  ``no-clique``    GB200 racks with one tray whose fabric gave no clique (the agent's ``node_<name>``)
  ``old-no-clique`` the same as an agent before that published it: the tray's host name as its domain

Each is a function of nothing (the same fleet every run); :func:`saved` writes one as ``kubectl get nodes -o json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from exporter.kube._desired._names import own_domain

P = "gpu.topology"
HOSTNAME = "kubernetes.io/hostname"
DOMAIN, RACK = f"{P}/nvlink-domain", f"{P}/rack"
BLOCK, SUBBLOCK = "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock"
TIER0, TIER1 = "fabric.topograph.run/tier-0", "fabric.topograph.run/tier-1"  # tier 0 nearest the node
A_BLOCK, B_BLOCK = "a.example/block", "b.example/block"
Fleet = dict[str, dict[str, str]]


def _gpu(host: str, product: str | None, domain: str, **more: str) -> dict[str, str]:
    labels = {HOSTNAME: host, f"{P}/gpu.count": "4", DOMAIN: domain, **more}
    if product is not None:
        labels[f"{P}/gpu.product"] = product
    return labels


def _clique(rack: int) -> str:
    return f"3f6c2a1e-8d4b-4c2f-9a57-{rack:012x}.1"


def _trays(sizes: list[int], host: Callable[[int, int], str],
           levels: dict[str, Callable[[int], str]] | None = None) -> Fleet:
    out: Fleet = {}
    for rack, size in enumerate(sizes):
        for tray in range(size):
            name = host(rack, tray)
            out[name] = _gpu(name, "NVIDIA-GB200", _clique(rack), **{RACK: f"1821325{rack:06d}"},
                             **{label: f(rack) for label, f in (levels or {}).items()})
    return out


def cloud() -> Fleet:
    fleet = _trays([4, 4], lambda r, t: f"gke-ml-training-prod-a4x-highgpu-4g-pool-{r:02d}-4e2b9d1c-x{t:03d}k")
    for name, labels in fleet.items():
        rack = int(name.split("-pool-")[1][:2])
        labels[BLOCK] = "b8f2a5c7d1e94f3a9c6b2d8e7f1a3c5b0a1b2c3d4e5f6071"
        labels[SUBBLOCK] = f"{'c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3'[:-1]}{rack}"
    for i in range(2):
        name = f"gke-ml-training-prod-a3-megagpu-8g-pool-00-9a8b7c6d-h{i:03d}xyzab"
        fleet[name] = _gpu(name, "NVIDIA-H100-80GB-HBM3", own_domain(name), **{
            BLOCK: "b8f2a5c7d1e94f3a9c6b2d8e7f1a3c5b0a1b2c3d4e5f6071",
            SUBBLOCK: "c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b9"})
    bare = "gke-ml-training-prod-unlabelled-gpu"
    fleet[bare] = _gpu(bare, None, own_domain(bare), **{BLOCK: fleet[name][BLOCK], SUBBLOCK: fleet[name][SUBBLOCK]})
    return fleet


def same_short() -> Fleet:
    return _trays([3, 3, 2], lambda r, t: f"tray-{r}-{t}", {A_BLOCK: lambda r: "b0", B_BLOCK: lambda r: f"b{r // 2}"})


def racks() -> Fleet:
    return _trays([18, 17, 18, 9], lambda r, t: f"gb200-r{r}-t{t:02d}",
                  {TIER0: lambda r: f"leaf-{r // 2}", TIER1: lambda r: "spine-0"})


def single() -> Fleet:
    return {f"hgx-{i}": _gpu(f"hgx-{i}", "NVIDIA-H100-80GB-HBM3", own_domain(f"hgx-{i}")) for i in range(4)}


def no_clique(*, old: bool = False) -> Fleet:
    fleet = _trays([4, 3], lambda r, t: f"tray-{r}{t}")
    lone = "tray-13"
    fleet[lone] = _gpu(lone, "NVIDIA-GB200", lone if old else own_domain(lone), **{RACK: "1821325000001"})
    return fleet


SHAPES: dict[str, Callable[[], Fleet]] = {
    "cloud": cloud, "same-short": same_short, "racks": racks, "single": single, "no-clique": no_clique,
    "old-no-clique": lambda: no_clique(old=True)}
LEVELS: dict[str, list[str]] = {  # the --level flags an operator of each would give
    "cloud": [BLOCK, SUBBLOCK], "same-short": [A_BLOCK, B_BLOCK], "racks": [TIER1, TIER0], "single": [],
    "no-clique": [], "old-no-clique": []}


def saved(fleet: Fleet, path: Path) -> Path:
    """``fleet`` as ``kubectl get nodes -o json`` writes it (what ``topolink cluster --from`` reads)."""
    items = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
             for name, labels in sorted(fleet.items())]
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path
