"""Profiles: how big, how many and how often. ``full`` is nvbandwidth's defaults for the copies and
nccl-tests' counts for the collectives (20 iterations, one warm-up, one window per cell) timed as nccl-tests
``-G 1`` times them, graph launches (nccl-tests' own default is ``-G 0``; ``collective_timing="stream"``
is that mode); ``quick`` is small and bounded for periodic runs: the tests that place a node (one copy per
kind of link, host latency, the all-reduce), at sizes that keep a pass within about 3 s on one GPU and
10 s on eight, so its figures are quick's, not full's; ``selftest`` checks that every test works at all.

Why graphs by default: the stream mode issues every grouped call from Python, several microseconds per
GPU more than nccl-tests' C loop, so at the small sizes (about 1 to 16 MiB on eight GPUs) it reads below
``-G 0``; a graph launch per GPU per window costs the same few microseconds once, not once per operation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ._errors import ProbeError

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
GRAPH, STREAM = "graph", "stream"  # the two ways nccl-tests times a cell: -G <launches> and -G 0
TIMINGS = (GRAPH, STREAM)


def powers_of_two(lo: int, hi: int, step: int = 2) -> tuple[int, ...]:
    out, size = [], lo
    while size <= hi:
        out.append(size)
        size *= step
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    name: str
    copy_bytes: int  # buffer per copy (nvbandwidth -b)
    host_copy_bytes: int | None = None  # the cpu backend's host copies (None: copy_bytes)
    copy_warmup: int  # untimed copies before each sample (nvbandwidth WARMUP_COUNT)
    copy_iters: int  # timed copies per sample (nvbandwidth --loopCount)
    samples: int  # samples per measurement; the median is reported (nvbandwidth -i)
    latency_bytes: int = 2 * MiB  # pointer-chase buffer
    latency_stride: int = 128  # bytes between chased pointers (16 pointers of 8 B)
    latency_accesses: int = 1_000_000
    latency_warmup: int = 10_000  # untimed accesses: loads the kernel, warms the TLB
    collective_sizes: tuple[int, ...]  # bytes per rank, GPUs (nccl-tests -b/-e/-f)
    host_collective_sizes: tuple[int, ...]  # bytes per rank, CPU ranks over gloo
    collective_warmup: int = 1  # nccl-tests -w since 2.16.8 (untimed operations before each cell's window)
    collective_iters: int = 20  # nccl-tests -n
    collective_timing: str = GRAPH  # GRAPH: nccl-tests -G <launches>; STREAM: -G 0, nccl-tests' default
    collective_graph_launches: int = 1  # nccl-tests -G: launches of the captured loop per timed window
    collective_samples: int = 1  # windows per cell, the median reported (nccl-tests: one window per cell)
    host_ranks: int = 2  # gloo processes (at least one per NUMA node with CPUs)
    rdma_bytes: int = 65536  # perftest message size (DEF_SIZE_BW)
    rdma_iters: int = 5000  # perftest write-BW iterations (DEF_ITERS_WB)
    every_numa_node: bool = True  # host tests from every node with CPUs, not only the GPU's own
    floor_bytes_per_second: float = 0.25e9  # the slowest rate a wall-time budget allows for
    floor_seconds_per_access: float = 20e-6  # the slowest pointer-chase access a budget allows for
    tests: tuple[str, ...] | None = None  # the tests run when none are named (None: every test)


# The cpu backend's full profile is bounded by the agent's memory (the probe child runs inside its
# container): host copies of 128 MiB (well past any CPU cache a single copy thread sees; the bidirectional
# test holds 6 x that, its copy back being twice the size) and gloo sizes to 16 MiB (two ranks forked after
# torch, a send and a receive buffer each, and gloo's own copies). benchmarks/probes.py --memory prints the
# peaks; README "Probes" gives them.
FULL = Profile(
    name="full", copy_bytes=512 * MiB, host_copy_bytes=128 * MiB, copy_warmup=4, copy_iters=16, samples=3,
    collective_sizes=powers_of_two(1 * MiB, 8 * GiB), host_collective_sizes=powers_of_two(1 * MiB, 16 * MiB, 4),
)
# GPUDirect RDMA is not in quick: each run starts two perftest processes and a CUDA context in one (about
# a second each), which alone would overrun the pass on a node with eight NICs.
QUICK_TESTS = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "device_to_device_memcpy_write_ce",
               "device_local_copy", "host_device_latency_sm", "all_reduce", "host_memcpy")
QUICK = Profile(
    name="quick", copy_bytes=64 * MiB, copy_warmup=2, copy_iters=8, samples=3, latency_accesses=50_000,
    collective_sizes=powers_of_two(1 * MiB, 256 * MiB, 16), host_collective_sizes=(1 * MiB, 4 * MiB),
    rdma_iters=1000, every_numa_node=False, tests=QUICK_TESTS,
)
SELFTEST = Profile(
    name="selftest", copy_bytes=4 * MiB, copy_warmup=1, copy_iters=2, samples=1, latency_accesses=10_000,
    latency_warmup=1000, collective_sizes=(1 * MiB,), host_collective_sizes=(64 * KiB,), collective_iters=2,
    rdma_iters=100, every_numa_node=False,
)
PROFILES = {p.name: p for p in (FULL, QUICK, SELFTEST)}


def with_collective_timing(p: Profile, timing: str | None) -> Profile:
    """``p`` with its collectives timed as ``timing`` (``graph``: nccl-tests -G 1; ``stream``: -G 0); None
    keeps the profile's own."""
    if timing is None or timing == p.collective_timing:
        return p
    if timing not in TIMINGS:
        raise ProbeError(f"unknown collective timing {timing!r}; choose one of {', '.join(TIMINGS)}")
    return replace(p, collective_timing=timing)


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ProbeError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}") from None
