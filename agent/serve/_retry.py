"""Waiting for NVML: what the served snapshot says of it, and how soon discovery tries again. Pure.

At boot the driver container loads the NVIDIA kernel modules minutes after the agent starts. Until NVML
answers, discovery marks every NVLink and GPU-identity fact unknown (so nothing NVLink-derived is published,
and with nothing published before, no label or attribute is guessed), the agent is not ready, and passes
come sooner: 1 s, 2 s, 4 s ... doubling up to the discovery interval, so the facts arrive soon after the
driver does, without a restart.
"""

from __future__ import annotations

import re

from topology import Snapshot, SourceStatus

_CODE = re.compile(r"NVML_ERROR_[A-Z_]+")
FIRST_RETRY_S = 1.0


def nvml_waiting(snap: Snapshot) -> str | None:
    """The NVML error while NVML does not answer on a node whose PCI bus shows NVIDIA GPUs; None otherwise."""
    nvml = next((o for o in snap.sources if o.name == "nvml"), None)
    if nvml is None or nvml.status is not SourceStatus.FAILED or not snap.gpus:
        return None
    m = _CODE.search(nvml.detail)
    return m.group(0) if m else "NVML_ERROR_UNKNOWN"


def retry_delay(failures: int, interval_s: float) -> float:
    """Seconds to the next discovery pass after ``failures`` passes in a row found NVML not answering."""
    if failures <= 0:
        return interval_s
    return min(interval_s, FIRST_RETRY_S * 2.0 ** min(failures - 1, 30))
