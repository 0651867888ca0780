"""Theoretical link rates, per direction, decimal bytes per second: lookups into the physics table
(``_physics``), where each figure and its source are."""

from __future__ import annotations

from ._physics import GB, nvlink_ceiling, nvlink_version_of_enum, pcie_ceiling, pcie_gen_of_gts

__all__ = ["GB", "nvlink_bytes_per_second", "nvlink_gen_from_nvml", "pcie_bytes_per_second", "pcie_gen_from_gts"]


def nvlink_gen_from_nvml(enum_value: int) -> int | None:
    return nvlink_version_of_enum(enum_value)


def nvlink_bytes_per_second(gen: int | None, links: int = 1) -> float | None:
    return nvlink_ceiling(gen, links)


def pcie_bytes_per_second(gen: int | None, width: int | None) -> float | None:
    return pcie_ceiling(gen, width)


def pcie_gen_from_gts(gts: float) -> int | None:
    return pcie_gen_of_gts(gts)
