"""Why a snapshot holds no NVIDIA GPU, in one line: what ``discover --format json`` and ``topo`` say on standard
error, apart from the summary so that they load none of it."""

from __future__ import annotations

from ..model._entities import Snapshot
from ..model._provenance import SourceStatus
from ..model._text_bounds import shown_text

NVIDIA = 0x10DE


def no_gpu_reason(snap: Snapshot) -> str | None:
    """One line saying why no NVIDIA GPU is in the snapshot, or None when there is one (NVML's words escaped)."""
    if snap.gpus:
        return None
    nvml = next((o for o in snap.sources if o.name == "nvml"), None)
    pci_nvidia = [f for f in snap.pci if f.vendor_id == NVIDIA]
    why = ["no PCI function with vendor 0x10de and class 0x0300/0x0302"]
    elsewhere = sorted({p.subject for p in snap.problems if "not a GPU of this host" in p.message})
    if elsewhere:
        why = [f"{len(elsewhere)} NVIDIA GPU(s) on the bus bound to another driver (vfio-pci passthrough) or "
               "excluded by the driver: not GPUs of this host"]
    elif pci_nvidia:
        why = [f"{len(pci_nvidia)} NVIDIA PCI function(s) but none is a GPU"]
    if nvml is None:
        why.append("NVML not consulted (source disabled)")
    elif nvml.status is SourceStatus.OK:
        why.append("NVML reports 0 devices")
    else:
        why.append(f"NVML {nvml.status.value}: {shown_text(nvml.detail or 'no reason given')}")
    return "No NVIDIA GPU found: " + "; ".join(why) + "."
