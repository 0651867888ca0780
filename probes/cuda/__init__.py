"""The cuda backend: copy-engine copies timed with events behind a latch kernel, pointer-chase latency,
NCCL all-reduce in one process, and GPUDirect RDMA through perftest. ``_backend`` opens a session per
item; the sessions (``_copy``, ``_latency``, ``_nccl``, ``_perftest``) share the runtime constants and
helpers of ``_runtime`` and the GPU-free decisions of ``_legs`` and ``_kernels``, and never import the
backend back. Importing any of it loads no CuPy: that happens in the probe's child process.

Imports: ``probes.core``, ``probes.host``, ``topology``; CuPy, NCCL and numpy only inside functions.
Imported by: nothing at import time. The backend registry (``probes.core``) loads ``CudaBackend`` by
name in the probe's child process.
"""

from ._backend import CudaBackend

__all__ = ["CudaBackend"]
