"""The NVML source: GPUs, NVLinks, GPU pairs, fabric and MIG as the driver reports them.

Absent (sysfs-only discovery) when NVML may not be used (a fixture root without its own test NVML), when
there is no library, or when ``nvmlInit`` says no driver is loaded. Any other ``nvmlInit`` failure (for
example a library/kernel module version mismatch) is a failure of the source: one problem, sysfs-only
discovery, an incomplete snapshot. Per-call failures are problems in the facts.
"""

from __future__ import annotations

from topology import Aspect

from ..access import DiscoveryContext, NvmlDriverNotLoaded, NvmlError, NvmlLibraryNotFound, open_nvml
from ._nvml_facts import (
    FIELD_NVLINK_LINK_COUNT,
    FIELD_NVSWITCH_CONNECTED_LINK_COUNT,
    P2P_CAPS,
    REMOTE_GPU,
    REMOTE_IBMNPU,
    REMOTE_SWITCH,
    REMOTE_UNKNOWN,
    SOURCE,
    NvLinkFact,
    NvmlFacts,
    NvmlGpuFacts,
    NvmlPairFacts,
)
from ._registry import SourceError, SubsystemAbsent, register


@register(SOURCE, covers=(Aspect.GPUS, Aspect.NVLINKS, Aspect.VERSIONS),
          help="GPUs, NVLinks, P2P, fabric and MIG through NVML (nvidia-ml-py)")
def read_nvml(ctx: DiscoveryContext) -> NvmlFacts:
    if not ctx.nvml_allowed:
        raise SubsystemAbsent("NVML is off for a sysfs root other than / without its own NVML library")
    try:
        port = open_nvml(ctx.nvml_library)
    except (NvmlLibraryNotFound, NvmlDriverNotLoaded) as exc:
        raise SubsystemAbsent(f"no NVIDIA driver: {exc}") from exc
    except NvmlError as exc:
        raise SourceError(f"NVML did not initialise: {exc}") from exc
    from ._nvml_read import collect  # the walk's modules load where a driver answers

    try:
        facts = collect(port)
    finally:
        try:  # noqa: SIM105 -- not contextlib.suppress: discovery loads no module it can do without
            port.close()
        except NvmlError:
            pass
    return facts


__all__ = [
    "FIELD_NVLINK_LINK_COUNT",
    "FIELD_NVSWITCH_CONNECTED_LINK_COUNT",
    "P2P_CAPS",
    "REMOTE_GPU",
    "REMOTE_IBMNPU",
    "REMOTE_SWITCH",
    "REMOTE_UNKNOWN",
    "NvLinkFact",
    "NvmlFacts",
    "NvmlGpuFacts",
    "NvmlPairFacts",
    "read_nvml",
]
