"""A node's GPU places read back from the ResourceSlice devices topolink published for it, so that a fleet job
computes the same groups, and the same claim class, as the node's agent did from its snapshot."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from topology import nvlink_bytes_per_second

from ..._core._claim_groups import GpuPlace
from ._slices import STD


def _attr(attrs: Mapping[str, Any], key: str, kind: str) -> Any:
    value = attrs.get(key)
    return value.get(kind) if isinstance(value, Mapping) else None


def places_from_devices(devices: Sequence[Mapping[str, Any]], driver: str) -> tuple[GpuPlace, ...]:
    """``devices``: one pool's devices in the v1 shape (name, attributes), as ``devices_of`` gives them."""
    nics: dict[str, tuple[str | None, str | None]] = {}
    gpus = []
    for d in devices:
        attrs = d.get("attributes") or {}
        kind = _attr(attrs, f"{driver}/type", "string")
        if kind == "nic":
            nics[str(d["name"])] = (_attr(attrs, f"{driver}/name", "string"), _attr(attrs, f"{STD}/pciBusID", "string"))
        elif kind == "gpu":
            gpus.append((str(d["name"]), attrs))
    out = []
    for name, attrs in gpus:
        bus = _attr(attrs, f"{STD}/pciBusID", "string")
        island = _attr(attrs, f"{driver}/nvlinkIsland", "int")
        if bus is None or island is None:
            continue  # a lost GPU carries no island: it is in no group
        count = _attr(attrs, f"{driver}/nvlinkCount", "int")
        gen = _attr(attrs, f"{driver}/nvlinkGen", "int")
        switch = _attr(attrs, f"{driver}/pcieSwitch", "string")
        above = _attr(attrs, f"{driver}/pcieSwitchesAbove", "string")
        nic_name, nic_bus = nics.get(_attr(attrs, f"{driver}/nearestNic", "string") or "", (None, None))
        out.append(GpuPlace(
            device=name, bus=bus, island=island,
            nvlink_bytes_per_second=(nvlink_bytes_per_second(gen, count) or None) if gen and count else None,
            switch=switch if switch and not switch.startswith("pci") else None,
            switches_above=tuple(above.split(",")) if above else (), nic=nic_name, nic_bus=nic_bus,
            nic_path=_attr(attrs, f"{driver}/nicPath", "string") if nic_bus else None))
    return tuple(out)
