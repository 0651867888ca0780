"""Theoretical link rates, per direction, decimal bytes per second.

NVLink per link: gen 1 20 GB/s, gens 2-4 25 GB/s, gen 5 50 GB/s (hwloc's table and NVIDIA's specs:
H100 18 links = 450 GB/s, B200/GB200 18 links = 900 GB/s). PCIe x16 per direction after line coding:
Gen3 15.75, Gen4 31.5, Gen5 63.0, Gen6 about 121 (FLIT overhead).
"""

from __future__ import annotations

GB = 1e9

# nvmlNvlinkVersion_t enum value -> NVLink generation (1=1.0, 2=2.0, 3=2.2, 4=3.0, 5=3.1, 6=4.0, 7=5.0, 8=6.0)
_NVML_NVLINK_ENUM_TO_GEN = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}

_NVLINK_PER_LINK = {1: 20 * GB, 2: 25 * GB, 3: 25 * GB, 4: 25 * GB, 5: 50 * GB}

_PCIE_X1 = {1: 0.25 * GB, 2: 0.5 * GB, 3: 15.75 * GB / 16, 4: 31.5 * GB / 16, 5: 63.0 * GB / 16, 6: 121.0 * GB / 16}

# sysfs current_link_speed GT/s -> generation
_GTS_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def nvlink_gen_from_nvml(enum_value: int) -> int | None:
    return _NVML_NVLINK_ENUM_TO_GEN.get(enum_value)


def nvlink_bytes_per_second(gen: int | None, links: int = 1) -> float | None:
    rate = _NVLINK_PER_LINK.get(gen) if gen is not None else None
    return None if rate is None else rate * links


def pcie_bytes_per_second(gen: int | None, width: int | None) -> float | None:
    rate = _PCIE_X1.get(gen) if gen is not None else None
    return None if rate is None or width is None else rate * width


def pcie_gen_from_gts(gts: float) -> int | None:
    return _GTS_TO_GEN.get(round(gts, 1))
