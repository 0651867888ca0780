"""The cpu backend: copies between host buffers bound to NUMA nodes (one thread on the source node's
CPUs; a second one copying back for the bidirectional test) and the collectives (all_reduce, all_gather,
reduce_scatter, alltoall) over gloo across rank processes on loopback. It runs the same plan, runner and
statistics as the cuda backend, and runs in CI. ``_backend`` opens a session per item: ``_copy`` for the
copies, ``_gloo`` for the collectives (its rank processes kept for the whole pass).

Imports: ``probes.core``, ``probes.host``, ``topology``; torch only when a collective runs (imported once
in the probe process, which forks the ranks from it).
Imported by: nothing at import time. The backend registry (``probes.core``) loads ``CpuBackend`` by
name in the probe's child process.
"""

from ._backend import CpuBackend

__all__ = ["CpuBackend"]
