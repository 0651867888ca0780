"""Host memory as both backends use it: buffers bound to a NUMA node, first-touched there and their
placement checked page by page (``HostBuffer``), threads pinned to a node's CPUs, and the random byte
pattern a copy moves with the check that it arrived.

Imports: ``probes.core``, ``topology`` and the standard library (libc and libnuma through ctypes).
Imported by: the ``cpu`` and ``cuda`` backends, which never import each other.
"""

from ._numa import HostBuffer, libnuma, on_cpus
from ._pattern import PATTERN_BYTES, fill_pattern, same_bytes

__all__ = [
    "PATTERN_BYTES",
    "HostBuffer",
    "fill_pattern",
    "libnuma",
    "on_cpus",
    "same_bytes",
]
