"""Assembly: what the sources read becomes one snapshot's entities and links.

``_snapshot`` builds the snapshot from the sysfs sources' facts (``_pci``: functions, GPUs, host bridges
and NVSwitches on the bus; ``_nic``: RDMA devices and network interfaces), then ``_nvml`` merges what NVML
said (identity, NVLinks, pairs) and cross-checks it with the bus, or ``_nvml_state`` settles what NVML's
silence means given the GPUs on the bus. Pure: no reads, no clock.
Imports the sources' fact types and ``topology``; imported by ``agent.discovery._discover``.
"""

from ._nvml import merge_nvml
from ._nvml_state import NVML_ONLY, nvml_unread
from ._snapshot import assemble

__all__ = ["NVML_ONLY", "assemble", "merge_nvml", "nvml_unread"]
