"""What a probe definition is, and the pure functions the catalogue builds its tests from: which sets of
endpoints a test runs between on a snapshot, which other endpoints only add traffic, and why a set cannot
run here. Directions name data flow between ``subjects[0]`` (a, the matrix row) and ``subjects[1]`` (b, the
column).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from topology import Gpu, NumaNode, Snapshot, nearest_nics, numa_affinity, nvlink_islands, ordered_gpus

from ._backend import Capabilities
from ._gdr import gdr_blocker
from ._model import Kind
from ._profiles import Profile

Subjects = tuple[str, ...]
HOST = "host"  # host memory on no known NUMA node (the snapshot names none with CPUs)


def _copied(size: int, ranks: int) -> int:
    del ranks
    return size


def _one(ranks: int) -> float:
    del ranks
    return 1.0


def _fine(subjects: Subjects, snap: Snapshot, caps: Capabilities) -> str | None:
    del subjects, snap, caps
    return None


def _alone(subjects: Subjects, snap: Snapshot) -> Subjects:
    del subjects, snap
    return ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSpec:
    name: str
    backend: str
    kind: Kind
    method: str  # the Measurement's method
    description: str  # the matrix heading, nvbandwidth's where there is one
    channels: tuple[str, ...]  # what each timed channel is: a direction, or a collective's mode
    endpoints: Callable[[Snapshot, Profile], tuple[Subjects, ...]]
    none_reason: str  # why there is nothing to run when ``endpoints`` is empty
    check: Callable[[Subjects, Snapshot, Capabilities], str | None] = _fine
    total: bool = False  # also report the channels' total (bidirectional): the sum of their medians
    moved: Callable[[int, int], int] = _copied  # (size, ranks) -> bytes counted per operation
    bus_factor: Callable[[int], float] = _one
    others: Callable[[Subjects, Snapshot], Subjects] = _alone  # endpoints that only add traffic

    @property
    def unit(self) -> str:
        return "seconds" if self.kind is Kind.LATENCY else "bytes_per_second"


def host_nodes(snap: Snapshot) -> tuple[NumaNode, ...]:
    """NUMA nodes with CPUs; a GPU's memory exposed as a node (GH200, GB200) is not host memory."""
    return tuple(sorted((n for n in snap.numa_nodes if n.cpus and not n.gpu_memory), key=lambda n: n.os_index))


def gpus(snap: Snapshot) -> tuple[Gpu, ...]:
    return tuple(g for g in ordered_gpus(snap) if not g.lost)


def local_node(snap: Snapshot, gpu: str) -> str:
    """The host node nearest ``gpu`` (its NUMA affinity), or ``host`` (unbound) when none is known."""
    local = numa_affinity(snap, gpu)
    return next((n.id for n in host_nodes(snap) if n.os_index == local), HOST)


def host_gpu(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    """Every (host node, GPU): from every node with CPUs in ``full``, from the GPU's own in the others."""
    nodes = host_nodes(snap)
    out: list[Subjects] = []
    for g in gpus(snap):
        chosen: list[NumaNode] = list(nodes)
        if not profile.every_numa_node:
            local = numa_affinity(snap, g.id)
            chosen = [n for n in nodes if n.os_index == local] or chosen
        out.extend((n.id, g.id) for n in chosen)
        if not chosen:
            out.append((HOST, g.id))
    return tuple(out)


def all_host(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    """(local node, GPU) for each GPU, when there are two or more: the others copy at the same time."""
    del profile
    found = gpus(snap)
    return tuple((local_node(snap, g.id), g.id) for g in found) if len(found) > 1 else ()


def other_gpus_with_their_nodes(subjects: Subjects, snap: Snapshot) -> Subjects:
    """Every other GPU after its own local host node: (node, GPU, node, GPU, ...)."""
    out: list[str] = []
    for g in gpus(snap):
        if g.id not in subjects:
            out += [local_node(snap, g.id), g.id]
    return tuple(out)


def gpu_pairs(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    del profile
    ids = [g.id for g in gpus(snap)]
    return tuple((a, b) for a in ids for b in ids if a != b)


def gpu_each(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    del profile
    return tuple((g.id,) for g in gpus(snap))


def gpu_each_of_two_or_more(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    """Each GPU as the one all the others copy to (from), when there are others."""
    found = gpu_each(snap, profile)
    return found if len(found) > 1 else ()


def other_gpus(subjects: Subjects, snap: Snapshot) -> Subjects:
    return tuple(g.id for g in gpus(snap) if g.id not in subjects)


MAX_PEERS = 8  # CUDA: a device maps at most 8 peers over PCIe at once (cudaErrorTooManyPeers)


def switch_peers(snap: Snapshot, target: str) -> frozenset[str]:
    """The GPUs ``target`` reaches through an NVSwitch fabric: CUDA imposes no 8-peer limit there (HGX and
    DGX systems map every other GPU of the fabric, 15 on a 16-GPU one); none without NVSwitches."""
    if not snap.nvswitches:
        return frozenset()
    island = next((i for i in nvlink_islands(snap) if target in i.gpus), None)
    return frozenset(island.gpus) - {target} if island else frozenset()


def peer_with_all_others(subjects: Subjects, snap: Snapshot, caps: Capabilities) -> str | None:
    """The target maps every other GPU at once (nvbandwidth enables each pair both ways). Over PCIe a
    device maps at most 8 peers, and a total over a chosen subset would not be the test, so beyond 8 others
    it is waived; on an NVSwitch fabric that limit does not exist and the test runs."""
    (target,) = subjects
    others = other_gpus(subjects, snap)
    fabric = switch_peers(snap, target)
    if len(others) > MAX_PEERS and not set(others) <= fabric:
        return (f"{target} would need peer access to all {len(others)} other GPUs at once; over PCIe a device maps "
                f"at most {MAX_PEERS} peers (cudaErrorTooManyPeers): N/A")
    missing = [o for o in others if not (caps.peer(target, o) and caps.peer(o, target))]
    if missing:
        return f"no peer access between {target} and {', '.join(missing)}: N/A (the total needs every pair)"
    return None


def gpu_groups(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    """All GPUs, then each NVLink island that is smaller than all and has at least two GPUs."""
    del profile
    everyone = tuple(g.id for g in gpus(snap))
    groups = [everyone] if len(everyone) > 1 else []
    for island in nvlink_islands(snap):
        if 1 < island.size < len(everyone):
            groups.append(island.gpus)
    return tuple(groups)


def gpu_nic(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    del profile
    out: list[Subjects] = []
    for g in gpus(snap):
        near = nearest_nics(snap, g.id)
        if near:
            out.append((g.id, near[0]))
    return tuple(out)


def node_pairs(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    del profile
    ids = [n.id for n in host_nodes(snap)] or [HOST]
    return tuple((a, b) for a in ids for b in ids)


def host_ranks(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    ids = [n.id for n in host_nodes(snap)] or [HOST]
    ranks = max(profile.host_ranks, len(ids))
    return (tuple(ids[r % len(ids)] for r in range(ranks)),)


def peer_both_ways(subjects: Subjects, snap: Snapshot, caps: Capabilities) -> str | None:
    del snap
    a, b = subjects
    if caps.peer(a, b) and caps.peer(b, a):
        return None
    return f"no peer access between {a} and {b}: N/A (a staged copy is never timed as peer-to-peer)"


def peer_chain(subjects: Subjects, snap: Snapshot, caps: Capabilities) -> str | None:
    """The row GPU chases pointers in the column GPU's memory: it needs access to it."""
    del snap
    a, b = subjects
    return None if caps.peer(a, b) else f"{a} cannot access {b}'s memory: N/A"


def gdr_ready(subjects: Subjects, snap: Snapshot, caps: Capabilities) -> str | None:
    return gdr_blocker(snap, subjects[0], subjects[1], caps)
