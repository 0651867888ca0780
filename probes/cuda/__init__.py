"""The cuda backend: copies, latency, NCCL and GPUDirect RDMA through perftest."""
