"""The NVLink fabric's health mask (``nvmlGpuFabricInfo.healthMask``, GB200/GB300) as degradation reasons (pure).

Field positions and values as nvidia-ml-py's ``pynvml.py`` names them (``NVML_GPU_FABRIC_HEALTH_MASK_*``): each
field is a few bits, 0 meaning NOT_SUPPORTED, so a driver that fills none says nothing, never "healthy"."""

from __future__ import annotations

_DEGRADED_BW = (0, 0x3, 1)  # (shift, width mask, the value that means it): DEGRADED_BW_TRUE
_ROUTE_UNHEALTHY = (4, 0x3, 1)  # ROUTE_UNHEALTHY_TRUE
_CONFIG_SHIFT, _CONFIG_WIDTH = 8, 0xF  # INCORRECT_CONFIGURATION: 0 not supported, 1 none, 2-8 which is wrong
_CONFIG_NONE = 1


def _field(mask: int, shift: int, width: int) -> int:
    return (mask >> shift) & width


def fabric_reasons(mask: int) -> tuple[str, ...]:
    """``fabric-degraded-bw`` (the fabric runs at reduced bandwidth), ``fabric-route-unhealthy`` (a route is
    unhealthy), ``fabric-config`` (an incorrect configuration: wrong system GUID or chassis serial, no partition,
    too few NVLinks, incompatible GPU firmware, invalid location, GPU state invalid)."""
    out = []
    if _field(mask, *_DEGRADED_BW[:2]) == _DEGRADED_BW[2]:
        out.append("fabric-degraded-bw")
    if _field(mask, *_ROUTE_UNHEALTHY[:2]) == _ROUTE_UNHEALTHY[2]:
        out.append("fabric-route-unhealthy")
    if _field(mask, _CONFIG_SHIFT, _CONFIG_WIDTH) not in (0, _CONFIG_NONE):
        out.append("fabric-config")
    return tuple(sorted(out))
