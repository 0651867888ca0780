"""Contradictory pairs of sysfs facts: each value alone is plausible, the two together cannot both be true.

Planned from a tree's clean snapshot, so each one really is a pair: a CPU listed by two NUMA nodes; a
function moved to another existing NUMA node while another function under its root complex says the
first; a link trained above its maximum; a node not 10 from itself, or 10 from another; Mellanox functions
bound to mlx5_core/mlx4_core with /sys/class/infiniband gone. The oracle is the usual one: whatever changed
must be marked unknown, and nothing derived from it published.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

from topology import Snapshot, format_cpulist

from .mutators import Mutation

_SPEED = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe",
          6: "64.0 GT/s PCIe"}
_NODES = "sys/devices/system/node"


def _device_dirs(files: tuple[str, ...]) -> dict[str, str]:
    """Bus id -> the function's directory below the root, from the attribute files discovery reads."""
    return {Path(f).parent.name: str(Path(f).parent) for f in files}


def _cpus_overlap(rng: random.Random, snap: Snapshot, dirs: dict[str, str], root: Path) -> Mutation | None:
    nodes = [n for n in snap.numa_nodes if n.cpus]
    if len(nodes) < 2:
        return None
    a, b = rng.sample(nodes, 2)
    cpus = sorted({*b.cpus, rng.choice(a.cpus)})
    return Mutation("contra-file", f"{_NODES}/node{b.os_index}/cpulist", format_cpulist(cpus).encode() + b"\n",
                    note=f"a CPU of {a.id} listed by {b.id} too")


def _numa_elsewhere(rng: random.Random, snap: Snapshot, dirs: dict[str, str], root: Path) -> Mutation | None:
    pci = {f.id: f for f in snap.pci}
    under: dict[str, list[str]] = defaultdict(list)
    for f in snap.pci:
        cur, seen = f.parent, {f.id}
        while cur in pci and cur not in seen:
            seen.add(cur)
            cur = pci[cur].parent
        if f.numa_node is not None and f.id in dirs:
            under[cur].append(f.id)
    pairs = [ids for ids in under.values() if len(ids) > 1]
    others = [n.os_index for n in snap.numa_nodes]
    if not pairs or len(others) < 2:
        return None
    victim = rng.choice(rng.choice(pairs))
    now = pci[victim].numa_node
    to = rng.choice([n for n in others if n != now])
    return Mutation("contra-file", f"{dirs[victim]}/numa_node", f"{to}\n".encode(),
                    note=f"{victim} in node {to}, its root complex's other functions in {now}")


def _link_over_max(rng: random.Random, snap: Snapshot, dirs: dict[str, str], root: Path) -> Mutation | None:
    links = [f for f in snap.pci if f.link and f.id in dirs and (
        (f.link.max_width or 32) < 32 or (f.link.max_gen or 6) < 6)]
    if not links:
        return None
    f = rng.choice(links)
    assert f.link is not None
    if f.link.max_width is not None and f.link.max_width < 32 and (rng.random() < 0.5 or not f.link.max_gen):
        return Mutation("contra-file", f"{dirs[f.id]}/current_link_width", f"{min(32, f.link.max_width * 2)}\n"
                        .encode(), note=f"{f.id} wider than its maximum x{f.link.max_width}")
    if f.link.max_gen is None or f.link.max_gen >= 6:
        return None
    return Mutation("contra-file", f"{dirs[f.id]}/current_link_speed", (_SPEED[f.link.max_gen + 1] + "\n").encode(),
                    note=f"{f.id} faster than its maximum Gen{f.link.max_gen}")


def _slit(rng: random.Random, snap: Snapshot, dirs: dict[str, str], root: Path) -> Mutation | None:
    m = snap.matrix("numa_distance")
    if m is None or not m.ids:
        return None
    i = rng.randrange(len(m.ids))
    row = [int(v) for v in m.values[i]]
    j = rng.randrange(len(row))
    row[j] = 11 if i == j else 10
    node = snap.numa_nodes[i].os_index
    return Mutation("contra-file", f"{_NODES}/node{node}/distance", (" ".join(map(str, row)) + "\n").encode(),
                    note=f"distance {m.ids[i]} to {m.ids[j]} is {row[j]}")


def _infiniband_gone(rng: random.Random, snap: Snapshot, dirs: dict[str, str], root: Path) -> Mutation | None:
    bound = [f for f in snap.pci if f.vendor_id == 0x15B3 and f.driver in ("mlx5_core", "mlx4_core")]
    if not bound or not (root / "sys/class/infiniband").is_dir():
        return None
    return Mutation("contra-remove-dir", "sys/class/infiniband", note=f"{len(bound)} Mellanox functions bound")


PLANNERS = (_cpus_overlap, _numa_elsewhere, _link_over_max, _slit, _infiniband_gone)


def plan(rng: random.Random, snap: Snapshot, root: Path, files: tuple[str, ...]) -> Mutation | None:
    """One contradiction the tree admits, or None when it admits none (one NUMA node, no links...)."""
    dirs = _device_dirs(files)
    planners = list(PLANNERS)
    rng.shuffle(planners)
    for planner in planners:
        m = planner(rng, snap, dirs, root)
        if m is not None:
            return m
    return None
