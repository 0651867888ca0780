"""The tests, as data, named as their reference tools name them: nvbandwidth's test keys and matrix
headings (NVIDIA/nvbandwidth v0.8, ``testcases_ce.cpp``, ``testcases_sm.cpp``), nccl-tests' collectives
(NVIDIA/nccl-tests 2.19.6) and perftest's ``ib_write_bw``. The cpu backend has an analogue of each one
where one makes sense: host copies between NUMA nodes, and the collectives over gloo. The all-to-one and
one-to-all totals have none: the cpu backend times one copy thread per item against its own clock, and a
total over threads on several nodes would need one window from the first start to the last end, which
it does not keep; the bidirectional host copy already loads one node from another.

How nvbandwidth builds the tests added here:

- ``*_bidirectional_memcpy_ce`` between host and GPU: the measured stream copies the buffer one way while a
  second stream copies a buffer twice as large the other way, so that it covers the whole timed window;
  only the measured direction is reported.
- ``all_to_host_*`` / ``host_to_all_*``: GPU i is measured against its NUMA-local host buffer while every
  other GPU copies a buffer twice as large to (from) its own local host buffer: the host link's load
  during a checkpoint load or a KV-cache offload. The bidirectional variants add the opposite direction on
  every GPU, the measured one included.
- ``*_bidirectional_memcpy_sm`` with the host: nvbandwidth's split-warp copy, one kernel per GPU with one
  thread per 16-byte word whose warps alternate direction between the host buffer and the GPU's; no
  truncation to the SM grid, and what is reported is half the bytes moved over the kernel's time (its
  estimate of one direction). The device_to_host form runs the very same copy as the host_to_device one.
  In the all-host forms every other GPU runs the same split copy, of the same size, with its own node.
  That one figure is one record, direction ``a<->b`` and method ``sm-split-warp`` in all four tests,
  never two records ``a->b`` and ``b->a`` holding the same number.
- ``all_to_one_*`` / ``one_to_all_*``: every other GPU copies a buffer of the timed size to (from) one
  GPU at once, and the row of the target GPU is the TOTAL: the bytes of every copy over the time from the
  first copy's start to the last one's end (direction ``all->a`` into the target, ``a->all`` out of it).
  It bounds what the target's links take together, so no single link's rate is its theoretical number.
  A target with more than 8 other GPUs is waived: it would map them all as peers at once.
- ``*_sm``: the copy is a kernel on the issuing GPU (grid = SMs x 512 threads, 16-byte words) instead of
  a copy engine; its size is truncated to a multiple of SMs x 512 x 16 bytes.
"""

from __future__ import annotations

from ._collectives import BUS_FACTORS, modes, moved
from ._model import Kind
from ._specs import (
    ProbeSpec,
    all_host,
    gdr_ready,
    gpu_each,
    gpu_each_of_two_or_more,
    gpu_groups,
    gpu_nic,
    gpu_pairs,
    host_gpu,
    host_ranks,
    node_pairs,
    other_gpus,
    other_gpus_with_their_nodes,
    peer_both_ways,
    peer_chain,
    peer_with_all_others,
)

_NO_GPU = "no GPU in the snapshot"
_TWO = "needs two GPUs"
_TWO_HOST = "needs two GPUs (with one, it is the plain host copy)"
# nvbandwidth's split-warp figure is one number for both directions (half the bytes moved both ways): one
# record, direction "a<->b", one method name for every test that takes it
SPLIT_METHOD = "sm-split-warp"
SPLIT_CHANNEL = "a<->b"


def _heading(engine: str, arrow: str, pair: str = "CPU(row) {} GPU(column)") -> str:
    return f"memcpy {engine} {pair.format(arrow)} bandwidth (GB/s)"


def _host(name: str, engine: str, method: str, arrow: str, channel: str) -> ProbeSpec:
    return ProbeSpec(name=name, backend="cuda", kind=Kind.COPY, method=method, description=_heading(engine, arrow),
                     channels=(channel,), endpoints=host_gpu, none_reason=_NO_GPU)


def _all_host(name: str, engine: str, arrow: str, channel: str) -> ProbeSpec:
    split = channel == SPLIT_CHANNEL
    return ProbeSpec(name=name, backend="cuda", kind=Kind.COPY, method=SPLIT_METHOD if split else engine.lower(),
                     description=_heading(engine, arrow), channels=(channel,), endpoints=all_host,
                     none_reason=_TWO_HOST, others=other_gpus_with_their_nodes)


def _d2d(name: str, engine: str, how: str, arrow: str, channels: tuple[str, ...]) -> ProbeSpec:
    bidirectional = len(channels) > 1
    heading = _heading(engine, arrow, "GPU(row) {} GPU(column)")
    if bidirectional:
        heading = heading.replace(" bandwidth", f" bidirectional {how} bandwidth")
    return ProbeSpec(name=name, backend="cuda", kind=Kind.COPY, method=f"{engine.lower()}-{how}", description=heading,
                     channels=channels, total=bidirectional, endpoints=gpu_pairs, none_reason=_TWO,
                     check=peer_both_ways)


def _total(name: str, arrow: str) -> ProbeSpec:
    """All-to-one / one-to-all: the target GPU's row of one total (every other GPU's copy at once)."""
    engine = name.rsplit("_", 1)[1].upper()
    into = name.startswith("all_to_one_write") or name.startswith("one_to_all_read")
    return ProbeSpec(name=name, backend="cuda", kind=Kind.COPY, method=f"{engine.lower()}-total",
                     description=_heading(engine, arrow, "GPU(row) {} GPU(column)"),
                     channels=("all->a" if into else "a->all",), endpoints=gpu_each_of_two_or_more,
                     none_reason=_TWO, check=peer_with_all_others, others=other_gpus)


def _collective(op: str, backend: str, method: str, description: str, channels: tuple[str, ...]) -> ProbeSpec:
    return ProbeSpec(name=op, backend=backend, kind=Kind.COLLECTIVE, method=method, description=description,
                     channels=channels, endpoints=gpu_groups if backend == "cuda" else host_ranks,
                     none_reason=_TWO if backend == "cuda" else "no NUMA node",
                     moved=lambda s, n: moved(op, s, n), bus_factor=BUS_FACTORS[op])


def _nccl(op: str) -> ProbeSpec:
    places = " and ".join(m.replace("_", " ") for m in modes(op))
    return _collective(op, "cuda", "nccl", f"NCCL {op} (float, {places}), over the size sweep (GB/s)", modes(op))


def _gloo(op: str, channels: tuple[str, ...]) -> ProbeSpec:
    places = " and ".join(m.replace("_", " ") for m in channels)
    return _collective(op, "cpu", "gloo", f"gloo {op} (float, {places}) across processes, over the size sweep "
                                          "(GB/s)", channels)


CUDA_SPECS: tuple[ProbeSpec, ...] = (
    _host("host_to_device_memcpy_ce", "CE", "ce", "->", "a->b"),
    _host("device_to_host_memcpy_ce", "CE", "ce", "<-", "b->a"),
    _host("host_to_device_bidirectional_memcpy_ce", "CE", "ce", "<->", "a->b"),
    _host("device_to_host_bidirectional_memcpy_ce", "CE", "ce", "<->", "b->a"),
    _d2d("device_to_device_memcpy_read_ce", "CE", "read", "->", ("b->a",)),
    _d2d("device_to_device_memcpy_write_ce", "CE", "write", "<-", ("a->b",)),
    _d2d("device_to_device_bidirectional_memcpy_read_ce", "CE", "read", "<->", ("b->a", "a->b")),
    _d2d("device_to_device_bidirectional_memcpy_write_ce", "CE", "write", "<->", ("a->b", "b->a")),
    _all_host("all_to_host_memcpy_ce", "CE", "<-", "b->a"),
    _all_host("all_to_host_bidirectional_memcpy_ce", "CE", "<->", "b->a"),
    _all_host("host_to_all_memcpy_ce", "CE", "->", "a->b"),
    _all_host("host_to_all_bidirectional_memcpy_ce", "CE", "<->", "a->b"),
    _host("host_to_device_memcpy_sm", "SM", "sm", "->", "a->b"),
    _host("device_to_host_memcpy_sm", "SM", "sm", "<-", "b->a"),
    _host("host_to_device_bidirectional_memcpy_sm", "SM", SPLIT_METHOD, "<->", SPLIT_CHANNEL),
    _host("device_to_host_bidirectional_memcpy_sm", "SM", SPLIT_METHOD, "<->", SPLIT_CHANNEL),
    _d2d("device_to_device_memcpy_read_sm", "SM", "read", "->", ("b->a",)),
    _d2d("device_to_device_memcpy_write_sm", "SM", "write", "<-", ("a->b",)),
    _d2d("device_to_device_bidirectional_memcpy_read_sm", "SM", "read", "<->", ("b->a", "a->b")),
    _d2d("device_to_device_bidirectional_memcpy_write_sm", "SM", "write", "<->", ("a->b", "b->a")),
    _all_host("all_to_host_memcpy_sm", "SM", "<-", "b->a"),
    _all_host("host_to_all_memcpy_sm", "SM", "->", "a->b"),
    _all_host("all_to_host_bidirectional_memcpy_sm", "SM", "<->", SPLIT_CHANNEL),
    _all_host("host_to_all_bidirectional_memcpy_sm", "SM", "<->", SPLIT_CHANNEL),
    _total("all_to_one_write_ce", "<-"),
    _total("all_to_one_read_ce", "->"),
    _total("one_to_all_write_ce", "->"),
    _total("one_to_all_read_ce", "<-"),
    _total("all_to_one_write_sm", "<-"),
    _total("all_to_one_read_sm", "->"),
    _total("one_to_all_write_sm", "->"),
    _total("one_to_all_read_sm", "<-"),
    ProbeSpec(name="device_local_copy", backend="cuda", kind=Kind.COPY, method="ce",
              description="memcpy local GPU(column) bandwidth (GB/s), bytes counted once", channels=("local",),
              endpoints=gpu_each, none_reason=_NO_GPU),
    ProbeSpec(name="host_device_latency_sm", backend="cuda", kind=Kind.LATENCY, method="pointer-chase",
              description="memory latency SM CPU(row) <-> GPU(column) (ns)", channels=("a<->b",),
              endpoints=host_gpu, none_reason=_NO_GPU),
    ProbeSpec(name="device_to_device_latency_sm", backend="cuda", kind=Kind.LATENCY, method="pointer-chase",
              description="Device to Device Latency SM GPU(row) <-> GPU(column) (ns)", channels=("a<->b",),
              endpoints=gpu_pairs, none_reason=_TWO, check=peer_chain),
    _nccl("all_reduce"),
    _nccl("all_gather"),
    _nccl("reduce_scatter"),
    _nccl("alltoall"),
    ProbeSpec(name="gdr_write_bw", backend="cuda", kind=Kind.RDMA, method="perftest",
              description="GPUDirect RDMA ib_write_bw into GPU(row) memory through NIC(column), the writer's "
                          "buffer in host memory (GB/s)",
              channels=("b->a",), endpoints=gpu_nic, none_reason="no RDMA NIC in the snapshot", check=gdr_ready),
)

CPU_SPECS: tuple[ProbeSpec, ...] = (
    ProbeSpec(name="host_memcpy", backend="cpu", kind=Kind.COPY, method="memcpy",
              description="memcpy CPU NUMA(row) -> NUMA(column) bandwidth (GB/s), thread on the row's CPUs",
              channels=("a->b",), endpoints=node_pairs, none_reason="no NUMA node"),
    ProbeSpec(name="host_bidirectional_memcpy", backend="cpu", kind=Kind.COPY, method="memcpy",
              description="memcpy CPU NUMA(row) <-> NUMA(column) bandwidth (GB/s): row to column timed on the "
                          "row's CPUs while a thread on the column's copies twice as much back",
              channels=("a->b",), endpoints=node_pairs, none_reason="no NUMA node"),
    _gloo("all_reduce", ("in_place",)),
    _gloo("all_gather", ("out_of_place", "in_place")),
    _gloo("reduce_scatter", ("out_of_place", "in_place")),
    _gloo("alltoall", ("out_of_place",)),
)

SPECS: dict[str, tuple[ProbeSpec, ...]] = {"cuda": CUDA_SPECS, "cpu": CPU_SPECS}
SM_TESTS = tuple(s.name for s in CUDA_SPECS if s.kind is Kind.COPY and s.name.endswith("_sm"))


def specs_for(backend: str) -> tuple[ProbeSpec, ...]:
    return SPECS.get(backend, ())


def spec(backend: str, name: str) -> ProbeSpec:
    found = next((s for s in specs_for(backend) if s.name == name), None)
    if found is None:
        raise KeyError(f"{backend} has no test {name!r}")
    return found
