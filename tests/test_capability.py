"""``topology.LinkCapability``: the one rule behind every theoretical number, as the probe report, the
metrics view, the bandwidth classes and the all-reduce estimate all see it."""

from __future__ import annotations

import topology as t
from exporter._core._health import BwKind, ratios
from probes.harness._report import versus_theoretical
from tests.probe_snapshots import G0, G1, G2, NIC, four_gpu_box
from topology import replace


def measured(test: str, subjects: tuple[str, ...], value: float, direction: str = "a->b",
             method: str = "ce") -> t.Measurement:
    return t.Measurement(test=test, subjects=subjects, direction=direction, value=value, unit="bytes_per_second",
                         source=t.Source.MEASURED, method=method)


def idle(snap: t.Snapshot, gpu: str, *, gen: int = 1, width: int = 16) -> t.Snapshot:
    """The GPU's link as NVML reports it at idle: the generation dropped to save power."""
    gpus = tuple(replace(g, pcie=replace(g.pcie, current_gen=gen, current_width=width))
                 if g.id == gpu and g.pcie else g for g in snap.gpus)
    return replace(snap, gpus=gpus)


def test_pcie_counts_at_the_maximum_generation_not_the_idle_one() -> None:
    box = idle(four_gpu_box(), G0, gen=1)
    cap = t.LinkCapability(box)
    assert cap.pcie(G0) == t.pcie_bytes_per_second(4, 16) == cap.pcie(G1)
    h2d = measured("host_to_device_memcpy_ce", ("numa0", G0), 25e9)
    assert cap.of(h2d) == t.pcie_bytes_per_second(4, 16)
    for test in ("all_to_host_memcpy_ce", "host_to_device_bidirectional_memcpy_ce", "device_to_host_memcpy_sm"):
        assert cap.of(replace(h2d, test=test)) == cap.of(h2d)
    assert "0.79" in versus_theoretical(box, [h2d])  # 25 / 31.5, not 25 / Gen1's 3.94


def test_a_link_trained_narrow_shows_in_the_ratio() -> None:
    box = idle(four_gpu_box(), G0, gen=4, width=8)
    h2d = measured("host_to_device_memcpy_ce", ("numa0", G0), 13e9)
    ((m, ratio),) = ratios(t.with_measurements(box, [h2d]))[BwKind.HOST_GPU]
    assert m == h2d and 0.40 < ratio < 0.45  # against x16: the lost lanes are visible


def test_between_gpus_nvlink_first_else_the_slower_pcie_and_never_half_known() -> None:
    box = four_gpu_box()
    cap = t.LinkCapability(box)
    assert cap.between(G0, G1) == 100e9  # 4 NVLink4 links
    assert cap.between(G0, G2) == t.pcie_bytes_per_second(4, 16)
    bidir = measured("device_to_device_bidirectional_memcpy_read_ce", (G0, G1), 150e9, direction="a<->b")
    assert cap.of(bidir) == 200e9
    unknown = replace(box, gpus=tuple(replace(g, pcie=None) if g.id == G2 else g
                                                  for g in box.gpus))
    half = t.LinkCapability(unknown)
    assert half.between(G0, G2) is None  # one end unknown: no bottleneck to claim
    ring = measured("all_reduce", (G0, G1, G2), 10e9, direction="busbw", method="nccl")
    assert half.of(ring) is None and cap.of(ring) == t.pcie_bytes_per_second(4, 16)
    for op in ("all_gather", "reduce_scatter", "alltoall"):  # nccl-tests' busbw compares with the links for each
        assert cap.of(replace(ring, test=op)) == cap.of(ring)
    assert cap.of(replace(ring, direction="avg_busbw")) is None  # a mean over sizes: no peak to compare
    assert t.all_reduce_estimate(unknown, [G0, G2], 1 << 30).seconds is None


def test_latencies_cpu_tests_and_unknown_nics_have_no_theoretical() -> None:
    cap = t.LinkCapability(four_gpu_box())
    latency = replace(measured("device_to_device_latency_sm", (G0, G1), 1e-6), unit="seconds")
    assert cap.of(latency) is None
    assert cap.of(measured("host_memcpy", ("numa0", "numa1"), 10e9, method="memcpy")) is None
    assert cap.of(measured("gdr_write_bw", (G0, "mlx5_9"), 40e9, method="perftest")) is None
    gdr = replace(measured("gdr_write_bw", (G0, NIC), 20e9, method="perftest"),
                              conditions=(("path", "mlx5_1 -> mlx5_0 over the fabric"),))
    assert cap.of(gdr) == 200e9 / 8  # the NIC's fastest port, 200 Gb/s
    looped = replace(gdr, conditions=(("path", "loopback: mlx5_0 reads the host buffer"),))
    assert cap.of(looped) is None and cap.of(replace(gdr, conditions=())) is None  # no wire crossed
