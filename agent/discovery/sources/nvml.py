"""The NVML source: GPUs, NVLinks, GPU pairs, fabric and MIG as the driver reports them.

Absent (sysfs-only discovery) when NVML may not be used (a fixture root without its own test NVML), when
there is no library, or when ``nvmlInit`` says no driver is loaded. Any other ``nvmlInit`` failure (for
example a library/kernel module version mismatch) is a failure of the source: one problem, sysfs-only
discovery, an incomplete snapshot. Per-call failures are problems in the facts.
"""

from __future__ import annotations

from topology import Aspect

from ..access import DiscoveryContext, NvmlDriverNotLoaded, NvmlError, NvmlLibraryNotFound, open_nvml
from ._registry import SourceError, SubsystemAbsent, register

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from ._nvml_facts import (
        FIELD_NVLINK_LINK_COUNT,
        FIELD_NVSWITCH_CONNECTED_LINK_COUNT,
        P2P_CAPS,
        REMOTE_GPU,
        REMOTE_IBMNPU,
        REMOTE_SWITCH,
        REMOTE_UNKNOWN,
        NvLinkFact,
        NvmlFacts,
        NvmlGpuFacts,
        NvmlPairFacts,
    )

SOURCE = "nvml"  # as ``._nvml_facts`` names it, where the records are


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

# What NVML read (``._nvml_facts``: its records and constants) loads where the source has read something, or on
# first use of a name here: a machine without NVML defines none of its records.
_FACTS = frozenset(__all__) - {"read_nvml"}


def __getattr__(name: str) -> object:
    if name not in _FACTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import _nvml_facts

    value = getattr(_nvml_facts, name)
    globals()[name] = value
    return value
