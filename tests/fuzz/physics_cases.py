"""Two planners of saved snapshots a reader must refuse (exit 3, the field named), each drawn at random
within its family so that cases not written down here are tried too:

- the physics planner: rates above what the links carry, NVLinks to what is no GPU or NVSwitch, more
  NVLinks than the family has, generations no row of the physics table has or not the family's, PCIe widths
  no link has, the two ends of one PCIe link trained differently;
- the saved-document planner: the other rules live discovery keeps, applied to ``--from``: a GPU's name of
  another family than its PCI device id, a date beyond the clock skew, a required field missing.

Each edit takes a clean snapshot document (``topolink discover --format json`` of a machine with NVLinks
and NVSwitches) and changes it in place.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from topology.fabric._physics import FAMILIES, NVLINK, PCIE, PCIE_WIDTHS, family_of_name
from topology.model._clock import MAX_CLOCK_SKEW_S

Doc = dict[str, Any]
Edit = Callable[[Doc, random.Random], None]


def _nvlinks(d: Doc) -> list[Doc]:
    return [lk for lk in d["links"] if lk["kind"] == "nvlink"]


def _states(d: Doc) -> list[Doc]:
    """Every PCIe link state of the document: GPUs', PCI functions', PCIe links'."""
    return [s for s in (*(g.get("pcie") for g in d["gpus"]), *(f.get("link") for f in d["pci"]),
                        *(lk.get("pcie") for lk in d["links"] if lk["kind"] == "pcie")) if s]


def _nvlink_rate(d: Doc, rng: random.Random) -> None:
    link = rng.choice([lk for lk in _nvlinks(d) if lk.get("bytes_per_second")])
    link["bytes_per_second"] *= rng.choice([1.01, 1.5, 2.0, 10.0, rng.uniform(1.01, 1000.0)])


def _nvlink_end(d: Doc, rng: random.Random) -> None:
    others = [f["id"] for f in d["pci"] if f["id"] not in {g["id"] for g in d["gpus"]}
              and f["id"] not in {s["id"] for s in d["nvswitches"]}]
    others += [h["id"] for h in d["host_bridges"]] + [n["id"] for n in d["numa_nodes"]]
    link = rng.choice(_nvlinks(d))
    gpus = {g["id"] for g in d["gpus"]}
    link["b" if link["a"] in gpus else "a"] = rng.choice(others)  # the end that is no GPU, or either


def _nvlink_count(d: Doc, rng: random.Random) -> None:
    gpu = rng.choice(d["gpus"])
    family = family_of_name(gpu.get("name"))
    most = family.max_nvlinks if family else 36
    mine = [lk for lk in _nvlinks(d) if gpu["id"] in (lk["a"], lk["b"])]
    link = rng.choice(mine)
    link["count"] = most - sum(lk["count"] for lk in mine) + link["count"] + rng.randint(1, 20)
    link["bytes_per_second"] = None


def _nvlink_unknown_generation(d: Doc, rng: random.Random) -> None:
    known = {g.version for g in NVLINK}
    link = rng.choice(_nvlinks(d))
    link["nvlink_version"] = rng.choice([v for v in range(1, 9) if v not in known])
    link["bytes_per_second"] = None


def _nvlink_unrated_with_a_rate(d: Doc, rng: random.Random) -> None:
    link = rng.choice(_nvlinks(d))
    link["nvlink_version"] = rng.choice([g.version for g in NVLINK if g.per_link is None])
    link["bytes_per_second"] = rng.uniform(1e9, 1e12)


def _nvlink_not_the_familys(d: Doc, rng: random.Random) -> None:
    family = family_of_name(d["gpus"][0].get("name"))
    assert family is not None
    version = rng.choice([g for g in NVLINK if g.per_link is not None and g.version != family.nvlink_version])
    for link in _nvlinks(d):
        link["nvlink_version"] = version.version
        link["bytes_per_second"] = None if version.per_link is None else version.per_link * link["count"]


def _pcie_unknown_generation(d: Doc, rng: random.Random) -> None:
    known = {g.gen for g in PCIE}
    state = rng.choice(_states(d))
    state[rng.choice(["current_gen", "max_gen"])] = rng.choice([g for g in range(1, 9) if g not in known])


def _pcie_width(d: Doc, rng: random.Random) -> None:
    state = rng.choice(_states(d))
    state[rng.choice(["current_width", "max_width"])] = rng.choice([w for w in range(1, 33) if w not in PCIE_WIDTHS])


def _pcie_rate(d: Doc, rng: random.Random) -> None:
    link = rng.choice([lk for lk in d["links"] if lk["kind"] == "pcie" and lk.get("bytes_per_second")])
    link["bytes_per_second"] *= rng.uniform(2.0, 500.0)  # the ceiling is the best generation at the widest width


def _pcie_ends(d: Doc, rng: random.Random) -> None:
    from agent.discovery.assemble._crosscheck_ends import facing_down
    from topology import from_dict

    snap = from_dict(d)
    pci = {f.id: f for f in snap.pci}
    pairs = [(f.id, f.parent) for f in snap.pci if f.link and f.link.current_width and f.parent in pci
             and pci[f.parent].link and pci[f.parent].is_bridge and facing_down(pci, pci[f.parent])]
    child, port = rng.choice(pairs)
    state = next(f["link"] for f in d["pci"] if f["id"] == port)
    mine = next(f["link"] for f in d["pci"] if f["id"] == child)
    if rng.random() < 0.5:
        state["current_width"] = rng.choice([w for w in PCIE_WIDTHS if w != mine["current_width"]])
    else:
        state["current_gen"] = rng.choice([g.gen for g in PCIE if g.gen != mine["current_gen"]])


def _gpu_model(d: Doc, rng: random.Random) -> None:
    gpu = rng.choice(d["gpus"])
    mine = family_of_name(gpu.get("name"))
    gpu["name"] = "NVIDIA " + rng.choice([f for f in FAMILIES if mine is None or f.name != mine.name]).name


def _future(d: Doc, rng: random.Random) -> None:
    ahead = MAX_CLOCK_SKEW_S + rng.choice([1.0, 3600.0, 86400.0 * 365, 86400.0 * 365 * 100, rng.uniform(1, 1e9)])
    target = rng.choice([d, *d.get("measurements", [])])
    target["taken_at"] = time.time() + ahead


def _missing_field(d: Doc, rng: random.Random) -> None:
    """A required field of a random object taken away (the reader must name it, never a Python signature)."""
    required = {"gpus": "id", "links": rng.choice(["a", "b", "kind"]), "pci": rng.choice(["id", "parent"]),
                "sources": rng.choice(["name", "status"]), "numa_nodes": rng.choice(["id", "os_index"])}
    where = rng.choice([k for k in required if d.get(k)])
    del rng.choice(d[where])[required[where]]


PHYSICS: dict[str, Edit] = {
    "physics-nvlink-rate": _nvlink_rate, "physics-nvlink-end": _nvlink_end, "physics-nvlink-count": _nvlink_count,
    "physics-nvlink-unknown-generation": _nvlink_unknown_generation,
    "physics-nvlink-unrated-rate": _nvlink_unrated_with_a_rate,
    "physics-nvlink-not-the-familys": _nvlink_not_the_familys,
    "physics-pcie-unknown-generation": _pcie_unknown_generation, "physics-pcie-width": _pcie_width,
    "physics-pcie-rate": _pcie_rate,
}
SAVED: dict[str, Edit] = {
    "saved-pcie-ends": _pcie_ends, "saved-gpu-model": _gpu_model, "saved-future": _future,
    "saved-missing-field": _missing_field,
}
RULES: dict[str, Edit] = {**PHYSICS, **SAVED}
