"""Synthetic NVSwitch machines of k boards, grown from a one-board profile (``hgx-h100``: 8 GPUs a board).

Board ``b`` is the base board's PCIe tree again in PCI domain ``b`` (``0003:15`` for board 3), with its
own NUMA nodes (the base's, numbered on, with their CPUs shifted past the previous boards') and its own
NICs (``mlx5_N`` renumbered on). Host bridges that hold only NVSwitches stay on board 0: every GPU's
NVLinks reach the same switches, so the machine is one NVLink fabric of all its GPUs, as the test NVML's
P2P answers say. No such machine exists; the profiles measure how discovery grows with the GPU count.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from topology import format_cpulist, parse_cpulist

from ._tree import ENDPOINT_KINDS, ProfileError


def _endpoints(node: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(kind, attributes) of every endpoint function below a host bridge or tree node."""
    for child in node.get("children") or node.get("switch") or ():
        yield from _endpoints(child)
    for kind in ENDPOINT_KINDS:
        body = node.get(kind)
        if kind in node:
            yield from ((kind, attrs) for attrs in (body if isinstance(body, list) else [body]) if attrs is not None)


def _cpus(numa: Mapping[str, Any]) -> tuple[int, ...]:
    return parse_cpulist(str(numa.get("cpus") or ""))


def scaled_doc(base: Mapping[str, Any], boards: int) -> dict[str, Any]:
    """The profile document of ``boards`` copies of ``base``'s GPU board on one NVLink fabric."""
    if boards < 1:
        raise ProfileError("a synthetic machine has at least one board")
    numa = list(base["numa"])
    cpus_per_board = max((c for n in numa for c in _cpus(n)), default=-1) + 1
    nics_per_board = sum(kind == "nic" for hb in base["pci"] for kind, _ in _endpoints(hb))
    nodes, pci = [], []
    for b in range(boards):
        nodes += [{**n, "node": int(n["node"]) + len(numa) * b,
                   "cpus": format_cpulist([c + cpus_per_board * b for c in _cpus(n)])} for n in numa]
        for hb in base["pci"]:
            kinds = {kind for kind, _ in _endpoints(hb)}
            if b and kinds == {"nvswitch"}:
                continue
            board = copy.deepcopy(dict(hb))
            for kind, attrs in _endpoints(board):
                name = str(attrs.get("name", ""))
                if kind == "nic" and name.startswith("mlx5_"):
                    attrs["name"] = f"mlx5_{int(name[5:]) + nics_per_board * b}"
            domain, bus = str(hb["host_bridge"]).split(":")
            board["host_bridge"] = f"{int(domain, 16) + b:04x}:{bus}"
            board["numa"] = int(hb.get("numa", -1)) + len(numa) * b if int(hb.get("numa", -1)) >= 0 else -1
            pci.append(board)
    doc = {**base, "name": f"{base.get('name', 'machine')}-x{gpus_per_board(base) * boards}", "numa": nodes,
           "pci": pci}
    doc.pop("reference", None)
    doc.pop("distance", None)  # 10 local, 21 remote
    return doc


def gpus_per_board(base: Mapping[str, Any]) -> int:
    return sum(kind == "gpu" for hb in base["pci"] for kind, _ in _endpoints(hb))


def write_scaled(base: Path, gpus: int, directory: Path) -> Path:
    """Writes the synthetic profile of ``gpus`` GPUs (a multiple of ``base``'s) to ``directory`` and returns
    its path, for :func:`materialize` or ``python -m tests.fakenvml run``."""
    doc = yaml.safe_load(base.read_text())
    per_board = gpus_per_board(doc)
    if per_board == 0 or gpus % per_board:
        raise ProfileError(f"{gpus} GPUs is not a multiple of {base.name}'s {per_board}")
    scaled = scaled_doc(doc, gpus // per_board)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{scaled['name']}.yaml"
    path.write_text(yaml.safe_dump(scaled, sort_keys=False))
    return path
