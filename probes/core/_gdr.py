"""GPUDirect RDMA: would the GPU-NIC pair work here, and if not, why.

The reason is the readiness verdict (peer memory module, dma-buf, PCIe distance, ACS) from
:func:`topology.gdr_readiness`, plus what the backend found missing on the perftest side.
"""

from __future__ import annotations

from topology import GdrVerdict, Snapshot, gdr_readiness

from ._backend import Capabilities

GDR_TEST = "gdr_write_bw"


def gdr_blocker(snap: Snapshot, gpu: str, nic: str, caps: Capabilities) -> str | None:
    """Why GPUDirect RDMA cannot be measured between ``gpu`` and ``nic`` here, or None when it can."""
    ready = gdr_readiness(snap, gpu, nic)
    verdict = f"readiness {ready.verdict.value}: " + "; ".join(ready.reasons)
    missing = caps.why_unavailable(GDR_TEST)
    if ready.verdict is GdrVerdict.NOT_READY:
        return verdict
    if missing:
        return f"{missing}; {verdict}"
    return None
