"""Probe definitions as data: name, endpoints, bytes counted, bus factor and what each needs to run.

Each test is defined the way its reference tool defines it: names and matrix headings are nvbandwidth's
(NVIDIA/nvbandwidth, ``testcase.h``), all-reduce bytes and bus factor are nccl-tests' (NVIDIA/nccl-tests,
``doc/PERFORMANCE.md``).
Directions name data flow between ``subjects[0]`` (a, the matrix row) and ``subjects[1]`` (b, the column).
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

# nccl-tests' bus factors (src/*.cu, doc/PERFORMANCE.md): busbw = algbw x factor(ranks).
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def all_reduce_bytes(size: int, ranks: int) -> int:
    """nccl-tests' S for all_reduce: count x sizeof(float), the count rounded down to whole floats."""
    del ranks
    return (size // 4) * 4


def rotation_offset(iteration: int, size: int, capacity: int) -> int:
    """nccl-tests' shift of the buffer pointer per iteration: size x (iter mod (capacity // size))."""
    slots = max(1, capacity // size) if size else 1
    return size * (iteration % slots)


def _copied(size: int, ranks: int) -> int:
    del ranks
    return size


def _one(ranks: int) -> float:
    del ranks
    return 1.0


def _fine(subjects: Subjects, snap: Snapshot, caps: Capabilities) -> str | None:
    del subjects, snap, caps
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSpec:
    name: str
    backend: str
    kind: Kind
    method: str  # the Measurement's method
    description: str  # the matrix heading, nvbandwidth's where there is one
    channels: tuple[str, ...]  # the direction of each channel timed at once
    endpoints: Callable[[Snapshot, Profile], tuple[Subjects, ...]]
    none_reason: str  # why there is nothing to run when ``endpoints`` is empty
    check: Callable[[Subjects, Snapshot, Capabilities], str | None] = _fine
    total: bool = False  # also report the channels' sum (bidirectional)
    moved: Callable[[int, int], int] = _copied  # (size, ranks) -> bytes counted per operation
    bus_factor: Callable[[int], float] = _one

    @property
    def unit(self) -> str:
        return "seconds" if self.kind is Kind.LATENCY else "bytes_per_second"


def host_nodes(snap: Snapshot) -> tuple[NumaNode, ...]:
    """NUMA nodes with CPUs; a GPU's memory exposed as a node (GH200, GB200) is not host memory."""
    return tuple(sorted((n for n in snap.numa_nodes if n.cpus and not n.gpu_memory), key=lambda n: n.os_index))


def gpus(snap: Snapshot) -> tuple[Gpu, ...]:
    return tuple(g for g in ordered_gpus(snap) if not g.lost)


def _host_gpu(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
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


def _gpu_pairs(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    del profile
    ids = [g.id for g in gpus(snap)]
    return tuple((a, b) for a in ids for b in ids if a != b)


def _gpu_each(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    del profile
    return tuple((g.id,) for g in gpus(snap))


def _gpu_groups(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    """All GPUs, then each NVLink island that is smaller than all and has at least two GPUs."""
    del profile
    everyone = tuple(g.id for g in gpus(snap))
    groups = [everyone] if len(everyone) > 1 else []
    for island in nvlink_islands(snap):
        if 1 < island.size < len(everyone):
            groups.append(island.gpus)
    return tuple(groups)


def _gpu_nic(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    del profile
    out: list[Subjects] = []
    for g in gpus(snap):
        near = nearest_nics(snap, g.id)
        if near:
            out.append((g.id, near[0]))
    return tuple(out)


def _node_pairs(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    del profile
    ids = [n.id for n in host_nodes(snap)] or [HOST]
    return tuple((a, b) for a in ids for b in ids)


def _host_ranks(snap: Snapshot, profile: Profile) -> tuple[Subjects, ...]:
    ids = [n.id for n in host_nodes(snap)] or [HOST]
    ranks = max(profile.host_ranks, len(ids))
    return (tuple(ids[r % len(ids)] for r in range(ranks)),)


def _peer(subjects: Subjects, snap: Snapshot, caps: Capabilities) -> str | None:
    del snap
    a, b = subjects
    if caps.peer(a, b) and caps.peer(b, a):
        return None
    return f"no peer access between {a} and {b}: N/A (a staged copy is never timed as peer-to-peer)"


def _peer_chain(subjects: Subjects, snap: Snapshot, caps: Capabilities) -> str | None:
    """The row GPU chases pointers in the column GPU's memory: it needs access to it."""
    del snap
    a, b = subjects
    return None if caps.peer(a, b) else f"{a} cannot access {b}'s memory: N/A"


def _gdr_ready(subjects: Subjects, snap: Snapshot, caps: Capabilities) -> str | None:
    return gdr_blocker(snap, subjects[0], subjects[1], caps)


_H2D = "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"
_D2H = "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)"

CUDA_SPECS: tuple[ProbeSpec, ...] = (
    ProbeSpec(name="host_to_device_memcpy_ce", backend="cuda", kind=Kind.COPY, method="ce", description=_H2D,
              channels=("a->b",), endpoints=_host_gpu, none_reason="no GPU in the snapshot"),
    ProbeSpec(name="device_to_host_memcpy_ce", backend="cuda", kind=Kind.COPY, method="ce", description=_D2H,
              channels=("b->a",), endpoints=_host_gpu, none_reason="no GPU in the snapshot"),
    ProbeSpec(name="device_to_device_memcpy_read_ce", backend="cuda", kind=Kind.COPY, method="ce-read",
              description="memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)", channels=("b->a",),
              endpoints=_gpu_pairs, none_reason="needs two GPUs", check=_peer),
    ProbeSpec(name="device_to_device_memcpy_write_ce", backend="cuda", kind=Kind.COPY, method="ce-write",
              description="memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)", channels=("a->b",),
              endpoints=_gpu_pairs, none_reason="needs two GPUs", check=_peer),
    ProbeSpec(name="device_to_device_bidirectional_memcpy_read_ce", backend="cuda", kind=Kind.COPY,
              method="ce-read", description="memcpy CE GPU(row) <-> GPU(column) bidirectional read bandwidth (GB/s)",
              channels=("b->a", "a->b"), total=True, endpoints=_gpu_pairs, none_reason="needs two GPUs",
              check=_peer),
    ProbeSpec(name="device_to_device_bidirectional_memcpy_write_ce", backend="cuda", kind=Kind.COPY,
              method="ce-write",
              description="memcpy CE GPU(row) <-> GPU(column) bidirectional write bandwidth (GB/s)",
              channels=("a->b", "b->a"), total=True, endpoints=_gpu_pairs, none_reason="needs two GPUs",
              check=_peer),
    ProbeSpec(name="device_local_copy", backend="cuda", kind=Kind.COPY, method="ce",
              description="memcpy local GPU(column) bandwidth (GB/s), bytes counted once", channels=("local",),
              endpoints=_gpu_each, none_reason="no GPU in the snapshot"),
    ProbeSpec(name="host_device_latency_sm", backend="cuda", kind=Kind.LATENCY, method="pointer-chase",
              description="memory latency SM CPU(row) <-> GPU(column) (ns)", channels=("a<->b",),
              endpoints=_host_gpu, none_reason="no GPU in the snapshot"),
    ProbeSpec(name="device_to_device_latency_sm", backend="cuda", kind=Kind.LATENCY, method="pointer-chase",
              description="Device to Device Latency SM GPU(row) <-> GPU(column) (ns)", channels=("a<->b",),
              endpoints=_gpu_pairs, none_reason="needs two GPUs", check=_peer_chain),
    ProbeSpec(name="all_reduce", backend="cuda", kind=Kind.COLLECTIVE, method="nccl",
              description="NCCL all_reduce (float sum, out of place), peak over the size sweep (GB/s)",
              channels=("all",), endpoints=_gpu_groups, none_reason="needs two GPUs",
              moved=all_reduce_bytes, bus_factor=BUS_FACTORS["all_reduce"]),
    ProbeSpec(name="gdr_write_bw", backend="cuda", kind=Kind.RDMA, method="perftest",
              description="GPUDirect RDMA ib_write_bw into GPU(row) memory through NIC(column) (GB/s)",
              channels=("b->a",), endpoints=_gpu_nic, none_reason="no RDMA NIC in the snapshot", check=_gdr_ready),
)

CPU_SPECS: tuple[ProbeSpec, ...] = (
    ProbeSpec(name="host_memcpy", backend="cpu", kind=Kind.COPY, method="memcpy",
              description="memcpy CPU NUMA(row) -> NUMA(column) bandwidth (GB/s), thread on the row's CPUs",
              channels=("a->b",), endpoints=_node_pairs, none_reason="no NUMA node"),
    ProbeSpec(name="all_reduce", backend="cpu", kind=Kind.COLLECTIVE, method="gloo",
              description="gloo all_reduce (float sum, in place) across processes, peak over the size sweep (GB/s)",
              channels=("all",), endpoints=_host_ranks, none_reason="no NUMA node",
              moved=all_reduce_bytes, bus_factor=BUS_FACTORS["all_reduce"]),
)

SPECS: dict[str, tuple[ProbeSpec, ...]] = {"cuda": CUDA_SPECS, "cpu": CPU_SPECS}


def specs_for(backend: str) -> tuple[ProbeSpec, ...]:
    return SPECS.get(backend, ())


def spec(backend: str, name: str) -> ProbeSpec:
    found = next((s for s in specs_for(backend) if s.name == name), None)
    if found is None:
        raise KeyError(f"{backend} has no test {name!r}")
    return found
