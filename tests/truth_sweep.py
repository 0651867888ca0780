"""The truth sweep: every file a discovery read, edited in turn, and what each edit may end in.

For one machine tree, :func:`clean_pass` discovers it while a :class:`~agent.discovery.access.Reads` watches,
and lists every file it read. :data:`EDITS` are the ways one file is edited: empty, garbage bytes, another
encoding, the value of the same file of another device or node, a value out of physical range, and a
plausible neighbour that disagrees with its sibling files. :func:`judge` says whether an edited tree's
snapshot ends in one of the three allowed ways: a named problem that leaves every changed fact unknown (the
command's exit 1), an answer identical to the clean one, or a difference only in facts whose row of the
facts table (``agent.discovery.assemble.FACT_ROWS``) says one witness is all there is.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot, Reads
from agent.discovery.assemble import alone_where, emulated_port_above, one_witness
from tests.fuzz.oracle import diff
from topology import Aspect, Snapshot

_NUMBER = re.compile(rb"\d+")
_LINE = re.compile(r"^(\S+) of (\S+) \((\S+)\) changed")
_NODE_SET = re.compile(r"^(\S+) of node changed")


@dataclass(frozen=True)
class Tree:
    """One machine tree to sweep: its root and, for a machine profile, its test NVML."""

    name: str
    root: Path
    nvml_library: str | None = None

    def discover(self) -> tuple[Snapshot, Reads]:
        with Reads() as reads:
            snap = discover(DiscoveryContext(root=FsRoot(self.root), node_name=self.name,
                                             nvml_library=self.nvml_library))
        return snap, reads


def clean_pass(tree: Tree) -> tuple[Snapshot, tuple[str, ...]]:
    """The clean snapshot and every file discovery read below the root (relative paths, first-read order)."""
    snap, reads = tree.discover()
    return snap, reads.below(tree.root)


def real_file(tree: Tree, rel: str) -> Path:
    """The regular file ``rel`` names, links followed inside the root (what an edit must change)."""
    return tree.root / FsRoot(tree.root).realpath(rel).lstrip("/")


def _neighbour(raw: bytes) -> bytes | None:
    m = _NUMBER.search(raw)
    if m is None:
        return None
    n = int(m.group())
    return raw[:m.start()] + str(n + 1 if n % 2 == 0 else n - 1).encode() + raw[m.end():]


def _out_of_range(raw: bytes) -> bytes | None:
    return _NUMBER.sub(b"4096000", raw) if _NUMBER.search(raw) else None


def _config_neighbour(raw: bytes) -> bytes | None:  # the device id, against the ``device`` file beside it
    return raw[:2] + bytes([raw[2] ^ 0x01]) + raw[3:] if len(raw) >= 4 else None


Editor = Callable[[bytes, Sequence[bytes], random.Random, bool], "bytes | None"]


def _other(raw: bytes, others: Sequence[bytes], rng: random.Random, binary: bool) -> bytes | None:
    differ = sorted({o for o in others if o != raw})
    return rng.choice(differ) if differ else None


EDITS: dict[str, Editor] = {
    "empty": lambda raw, others, rng, binary: b"",
    "garbage": lambda raw, others, rng, binary: b"\xff\xfe\x00\x9cgarbage\x01\n",
    "utf-16": lambda raw, others, rng, binary: None if binary or not raw.strip() else
    raw.decode(errors="replace").encode("utf-16"),
    "other-device": _other,
    "out-of-range": lambda raw, others, rng, binary: raw[:3] if binary else _out_of_range(raw),
    "sibling": lambda raw, others, rng, binary: _config_neighbour(raw) if binary else _neighbour(raw),
}


def is_binary(rel: str) -> bool:
    return rel.rsplit("/", 1)[-1] == "config"


def judge(clean: Snapshot, edited: Snapshot) -> list[str]:
    """What the edited snapshot gets wrong: each fact that changed while it claims to know it, less the facts
    (or parts of one) whose row says one witness is all there is, there or everywhere."""
    errors = []
    for line in diff(clean, edited):
        m = _LINE.match(line)
        if m is not None and _alone(clean, edited, m.group(3), Aspect(m.group(1)), m.group(2)):
            continue
        n = _NODE_SET.match(line)
        if n is not None and one_witness("node", Aspect(n.group(1))):
            continue
        errors.append(line)
    return errors


def _alone(clean: Snapshot, edited: Snapshot, kind: str, aspect: Aspect, subject: str) -> bool:
    if one_witness(kind, aspect):
        return True
    if kind == "node" and aspect is Aspect.NUMA:
        return _node_numa_parts(clean, edited) <= {p for p in ("memory", "distance", "online")
                                                   if one_witness("node", aspect, p)}
    if aspect is Aspect.PCIE_LINK and kind == "pci" and one_witness(kind, aspect, "maximum") and _only_maximum(
            clean, edited, subject):
        return True
    if kind == "node" and aspect is Aspect.VERSIONS:
        return _version_parts(clean, edited) <= {p for p in ("cuda minor",) if one_witness(kind, aspect, p)}
    if kind == "gpu" and aspect is Aspect.FABRIC and alone_where(kind, aspect):
        return _fabric_alone(clean, subject)
    if kind == "gpu" and aspect is Aspect.NUMA and _memory_nodes_only(clean, edited, subject):
        return bool(one_witness(kind, aspect, "memory nodes"))
    if kind == "gpu" and aspect in (Aspect.IDENTITY, Aspect.P2P):
        return _gpu_parts(clean, edited, subject, aspect) <= {p for p in ("memory", "status")
                                                              if one_witness(kind, aspect, p)}
    if aspect is Aspect.PCIE_LINK and emulated_port_above(clean, subject) is not None:
        return "emulated" in alone_where("gpu", aspect)  # the hypervisor's port speaks for its own link only
    if kind != "gpu" and alone_where(kind, aspect) and aspect is Aspect.PCIE_LINK:  # nothing above it to compare
        pci = {f.id: f for f in clean.pci}
        parent = pci.get(pci[subject].parent) if subject in pci else None
        return parent is None or parent.link is None or parent.link.current_gen is None
    if alone_where(kind, aspect) and aspect is Aspect.NUMA:
        said = [f.numa_node for s in (clean, edited) for f in s.pci if f.id == subject]
        return None in said or _numa_alone(clean, subject)
    return False


def _version_parts(clean: Snapshot, edited: Snapshot) -> set[str]:
    before, after = dict(clean.versions), dict(edited.versions)
    parts = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    cuda = [v.get("cuda_driver", "").partition(".") for v in (before, after)]
    if "cuda_driver" in parts and cuda[0][0] == cuda[1][0] and cuda[0][0]:
        parts = (parts - {"cuda_driver"}) | {"cuda minor"}
    return parts


def _fabric_alone(clean: Snapshot, subject: str) -> bool:
    """The GPU reaches no NVSwitch over NVLink and is no GB200/GB300: no check has anything to compare."""
    switches = {s.id for s in clean.nvswitches}
    gpu = next((g for g in clean.gpus if g.id == subject), None)
    multi = gpu is not None and any(p in (gpu.name or "").upper() for p in ("GB200", "GB300"))
    return not multi and not any(subject in (lk.a, lk.b) and {lk.a, lk.b} & switches for lk in clean.links)


def _memory_nodes_only(clean: Snapshot, edited: Snapshot, subject: str) -> bool:
    """Only the GPU's memory affinity differs, and both readings list the node of its function."""
    before = next((g for g in clean.gpus if g.id == subject), None)
    after = next((g for g in edited.gpus if g.id == subject), None)
    node = next((f.numa_node for f in edited.pci if f.id == subject), None)
    if before is None or after is None or node is None:
        return False
    rest = ("numa_node", "cpu_affinity", "gpu_numa_id")
    return all(getattr(before, f) == getattr(after, f) for f in rest) and all(
        node in (g.memory_affinity or ()) for g in (before, after))


def _gpu_parts(clean: Snapshot, edited: Snapshot, subject: str, aspect: Aspect) -> set[str]:
    """Which parts of a GPU's identity (memory, or "identity": the rest) or P2P ("status": the P2P status
    matrices, or "ancestor") differ."""
    before = next((g for g in clean.gpus if g.id == subject), None)
    after = next((g for g in edited.gpus if g.id == subject), None)
    if before is None or after is None:
        return {"gpu"}
    if aspect is Aspect.IDENTITY:
        rest = ("index", "minor", "uuid", "name", "pci_device_id", "compute_capability", "architecture", "lost")
        return ({"memory"} if before.memory_bytes != after.memory_bytes else set()) | (
            {"identity"} if any(getattr(before, f) != getattr(after, f) for f in rest) else set())
    parts = set()
    for m in clean.matrices:
        other = edited.matrix(m.name)
        if m.name.startswith("nvml_") and (other is None or other != m):
            parts.add("ancestor" if m.name == "nvml_common_ancestor" else "status")
    return parts


def _only_maximum(clean: Snapshot, edited: Snapshot, subject: str) -> bool:
    """Whether only the maximum of the function's link differs (its current speed and width are as they were)."""
    before = next((f.link for f in clean.pci if f.id == subject), None)
    after = next((f.link for f in edited.pci if f.id == subject), None)
    if before is None or after is None:
        return False
    return (before.current_gen, before.current_width) == (after.current_gen, after.current_width)


def _numa_alone(clean: Snapshot, subject: str) -> bool:
    """The functions of ``subject`` (itself, or those under a root complex) say nothing of a node: -1 or every
    CPU, and none under the same root complex names a node with fewer CPUs."""
    pci = {f.id: f for f in clean.pci}
    every = {c for n in clean.numa_nodes for c in n.cpus}

    def root(fid: str) -> str:
        seen = set()
        while fid in pci and fid not in seen:
            seen.add(fid)
            fid = pci[fid].parent
        return fid

    top = subject if subject not in pci else root(subject)
    under = [f for f in clean.pci if root(f.id) == top]
    return all(f.numa_node is None or f.local_cpus is None or set(f.local_cpus) >= every for f in under)


def _node_numa_parts(clean: Snapshot, edited: Snapshot) -> set[str]:
    """Which parts of the node-wide NUMA fact differ: memory, distance, online (CPUs a node lost), cpus."""
    parts = set()
    if clean.matrix("numa_distance") != edited.matrix("numa_distance"):
        parts.add("distance")
    before, after = {n.id: n for n in clean.numa_nodes}, {n.id: n for n in edited.numa_nodes}
    if before.keys() != after.keys():
        return parts | {"nodes"}
    for i, n in before.items():
        m = after[i]
        if n.memory_bytes != m.memory_bytes:
            parts.add("memory")
        if n.cpus != m.cpus:
            parts.add("online" if set(m.cpus) < set(n.cpus) else "cpus")
        if n.gpu_memory != m.gpu_memory or n.os_index != m.os_index:
            parts.add("nodes")
    return parts


@dataclass(frozen=True)
class Outcome:
    file: str
    edit: str
    verdict: str  # identical, problem, one-witness, or failed
    errors: tuple[str, ...] = ()

    def report(self) -> str:
        return f"{self.file} [{self.edit}]: " + "; ".join(self.errors[:4])


def sweep_file(tree: Tree, clean: Snapshot, rel: str, others: Sequence[bytes], *, edits: Sequence[str],
               rng: random.Random) -> list[Outcome]:
    """Each edit of one file in turn, the file put back after each."""
    path = real_file(tree, rel)
    raw = path.read_bytes()
    out = []
    try:
        for name in edits:
            new = EDITS[name](raw, others, rng, is_binary(rel))
            if new is None or new == raw:
                continue
            _write(path, new)
            try:
                snap, _ = tree.discover()
            except Exception as exc:  # a crash is a finding, named like the rest
                out.append(Outcome(rel, name, "failed", (f"discovery raised {exc!r}",)))
                continue
            out.append(Outcome(rel, name, *verdict(clean, snap)))
    finally:
        _write(path, raw)
    return out


def verdict(clean: Snapshot, snap: Snapshot) -> tuple[str, tuple[str, ...]]:
    """How an edited discovery ended: failed (with what it gets wrong), identical, problem or one-witness."""
    errors = judge(clean, snap)
    said = ("failed" if errors else "identical" if snap == _same_time(clean, snap)
            else "problem" if not snap.complete else "one-witness")
    return said, tuple(errors)


def _same_time(clean: Snapshot, snap: Snapshot) -> Snapshot:
    from topology import replace

    return replace(clean, taken_at=snap.taken_at, sources=snap.sources)


def _write(path: Path, data: bytes) -> None:
    """Replaces the file's content through a new inode (a hard-linked copy's twin keeps its own)."""
    mode = path.stat().st_mode
    path.unlink()
    path.write_bytes(data)
    os.chmod(path, mode | 0o444)
