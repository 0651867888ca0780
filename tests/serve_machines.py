"""Snapshots of machine profiles for the serve, metrics and HTTP tests, and a full synthetic probe set.

The synthetic measurements are ``source=simulated``: they size the exposition as a node with every CUDA
probe done would, and are never presented as measured.
"""

from __future__ import annotations

import os
from pathlib import Path

import topology as t
from agent.discovery import discover
from agent.discovery.access import DiscoveryContext, FsRoot
from tests.fakenvml import ENV_PROFILE, FakeNode, materialize

_D2D = ("device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce")


def discover_profile(name: str, workdir: Path) -> tuple[t.Snapshot, FakeNode]:
    node = materialize(name, workdir)
    old = os.environ.get(ENV_PROFILE)
    os.environ[ENV_PROFILE] = str(node.nvml_profile)
    try:
        snap = discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))
    finally:
        if old is None:
            os.environ.pop(ENV_PROFILE, None)
        else:
            os.environ[ENV_PROFILE] = old
    return snap, node


def full_measurements(snap: t.Snapshot) -> t.Snapshot:
    """Every copy test per GPU pair and direction, host copies per GPU, latency per pair, one all-reduce."""
    gpus = [g.id for g in t.ordered_gpus(snap)]
    ms: list[t.Measurement] = []

    def add(test: str, subjects: tuple[str, ...], direction: str, value: float, *, unit: str = "bytes_per_second",
            method: str = "ce") -> None:
        ms.append(t.Measurement(test=test, subjects=subjects, direction=direction, value=value, unit=unit,
                                source=t.Source.SIMULATED, method=method, backend="cuda", size_bytes=64 << 20))

    for a in gpus:
        add("host_to_device_memcpy_ce", ("numa0", a), "a->b", 50e9)
        add("device_to_host_memcpy_ce", (a, "numa0"), "a->b", 50e9)
        for b in gpus:
            if a == b:
                continue
            for test in _D2D:
                add(test, (a, b), "a->b", 380e9, method="ce-read" if "read" in test else "ce-write")
            for d in ("a->b", "b->a", "a<->b"):
                add("device_to_device_bidirectional_memcpy_read_ce", (a, b), d, 370e9, method="ce-read")
            add("device_to_device_latency_sm", (a, b), "a->b", 1e-6, unit="seconds", method="pointer-chase")
    add("all_reduce", tuple(gpus), "busbw", 360e9, method="nccl")
    add("all_reduce", tuple(gpus), "algbw", 200e9, method="nccl")
    return t.with_measurements(snap, ms)
