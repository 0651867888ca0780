"""What the links between devices allow, per direction: the one rule behind every theoretical number (the
probe report, the metrics, the bandwidth classes and the all-reduce estimate).

PCIe counts at the link's maximum generation and width. NVIDIA GPUs drop the generation at idle to save
power and raise it under load, so the generation read at discovery says nothing about what a copy gets;
a link trained to fewer lanes than it supports is degradation, which the ratio to this number shows.
Between two GPUs: their NVLinks when they have any, else the slower of their two PCIe links (both must be
known: one alone would be a guess at the bottleneck).
"""

from __future__ import annotations

from ..model._entities import Snapshot
from ..model._measurement import Measurement
from ._paths import PathIndex, path_index
from ._rates import pcie_bytes_per_second

# nvbandwidth's host <-> GPU copies, each reported per direction: the GPU's PCIe link bounds them (in the
# bidirectional, all-to-host and host-to-all tests the other copies only load that link or the host's).
HOST_COPY_TESTS = (
    "host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "host_to_device_bidirectional_memcpy_ce",
    "device_to_host_bidirectional_memcpy_ce", "all_to_host_memcpy_ce", "all_to_host_bidirectional_memcpy_ce",
    "host_to_all_memcpy_ce", "host_to_all_bidirectional_memcpy_ce", "host_to_device_memcpy_sm",
    "device_to_host_memcpy_sm", "all_to_host_memcpy_sm", "host_to_all_memcpy_sm",
    # the split-warp SM copies: nvbandwidth reports half of both directions' bytes, its estimate of one
    "host_to_device_bidirectional_memcpy_sm", "device_to_host_bidirectional_memcpy_sm",
    "all_to_host_bidirectional_memcpy_sm", "host_to_all_bidirectional_memcpy_sm",
)
# nccl-tests' bus bandwidth is defined to compare with a link's rate, whatever the collective
NCCL_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall")
# The probe profiles whose figures are compared with what the links allow (a ratio, a class, an alert):
# ``full`` (the reference tools' sizes and counts), and "" for a figure that names no profile (taken before
# figures said theirs). ``quick`` (the agent's periodic pass: 64 MiB copies, collectives to 256 MiB) reads
# below ``full`` and the anchors on fast links; no table says yet by how much per class of link (that needs
# GPUs), so its figures are shown as measured, with their profile, and not compared.
COMPARED_PROFILES = ("full", "")


class LinkCapability:
    def __init__(self, snap: Snapshot, index: PathIndex | None = None) -> None:
        self._index = index or path_index(snap)
        self._pcie: dict[str, float | None] = {}
        for g in snap.gpus:
            p = g.pcie
            self._pcie[g.id] = None if p is None else pcie_bytes_per_second(
                p.max_gen or p.current_gen, p.max_width or p.current_width)
        self._nic_rate: dict[str, float | None] = {}
        for n in snap.nics:
            rates = [p.rate_gbps for p in n.ports if p.rate_gbps is not None]
            self._nic_rate[n.id] = max(rates) * 1e9 / 8 if rates else None

    def pcie(self, gpu: str) -> float | None:
        return self._pcie.get(gpu)

    def between(self, a: str, b: str) -> float | None:
        nv = self._index.nvlink_bandwidth(a, b)
        if nv:
            return nv
        ends = (self.pcie(a), self.pcie(b))
        return min(ends) if None not in ends else None  # type: ignore[type-var]

    @staticmethod
    def compares(m: Measurement) -> bool:
        """Whether ``m``'s profile is one whose figures are compared with the theoretical rate (a ratio, a
        class); :meth:`of` still bounds every figure (a measurement above physics is refused whatever its
        profile)."""
        return dict(m.conditions).get("profile", "") in COMPARED_PROFILES

    def of(self, m: Measurement) -> float | None:
        """The theoretical rate for a measurement of a known test, per direction (a bidirectional total
        counts both); None for latencies, CPU tests and what the snapshot cannot bound."""
        if m.unit != "bytes_per_second":
            return None
        if m.test in HOST_COPY_TESTS and len(m.subjects) == 2:
            return self.pcie(m.subjects[1])
        if m.test.startswith("device_to_device_") and len(m.subjects) == 2:
            one = self.between(*m.subjects)
            return None if one is None else one * (2 if m.direction == "a<->b" else 1)
        if m.test in NCCL_COLLECTIVES and m.method == "nccl" and m.direction == "busbw" and len(m.subjects) > 1:
            pairs = [self.between(a, b) for i, a in enumerate(m.subjects) for b in m.subjects[i + 1:]]
            return None if None in pairs else min(p for p in pairs if p is not None)
        if m.test == "gdr_write_bw" and len(m.subjects) == 2:
            if dict(m.conditions).get("path", "loopback").startswith("loopback"):
                return None  # both ends on one NIC: the data never crossed the wire the port's rate is for
            return self._nic_rate.get(m.subjects[1])
        return None
