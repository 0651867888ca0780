"""The cuda backend: copies by copy engine or SM kernel, timed with events behind a latch kernel and
checked after every sample; pointer-chase latency; NCCL collectives in one process, timed as nccl-tests
times them (the host's wall clock over CUDA graph launches, nccl-tests -G 1, or over the calls issued on
the stream, -G 0, asked by the plan or where capture is refused; each cell records which);
and GPUDirect RDMA through perftest. ``_backend`` opens a session per item; the sessions
(``_copy``, ``_latency``, ``_nccl``, ``_perftest``) share the buffers, latch and pattern of ``_buffers``
and the per-item peer access of ``_peers``, above the runtime constants and helpers of ``_runtime`` and
the GPU-free decisions of ``_legs`` and ``_kernels``; none imports the backend back. Importing any of it
loads no CuPy: that happens in the probe's child process, once per pass.

Imports: ``probes.core``, ``probes.host``, ``topology``; CuPy, NCCL and numpy only inside functions.
Imported by: nothing at import time. The backend registry (``probes.core``) loads ``CudaBackend`` by
name in the probe's child process.
"""

from ._backend import CudaBackend

__all__ = ["CudaBackend"]
