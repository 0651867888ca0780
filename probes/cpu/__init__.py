"""The cpu backend: copies between host buffers bound to NUMA nodes (one thread on the source node's
CPUs) and a gloo all-reduce across rank processes over loopback. It runs the same plan, runner and
statistics as the cuda backend, and runs in CI.

Imports: ``probes.core``, ``probes.host``, ``topology``; torch only inside the gloo rank processes.
Imported by: nothing at import time. The backend registry (``probes.core``) loads ``CpuBackend`` by
name in the probe's child process.
"""

from ._backend import CpuBackend

__all__ = ["CpuBackend"]
