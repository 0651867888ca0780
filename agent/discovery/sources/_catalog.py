"""Every discovery source by name, with its default state and help: what the command line needs for
``--[no-]source.NAME`` without importing a source (each pulls in the model). A source's ``register`` call
must agree with its row here; the table refuses one that does not."""

# (name, enabled by default, help), sorted by name; the module agent.discovery.sources.<name> registers the source.
SOURCE_FLAGS: tuple[tuple[str, bool, str], ...] = (
    ("gdr", True, "GPUDirect RDMA readiness: nvidia_peermem, memory_peers, dma-buf"),
    ("infiniband", True, "RDMA devices, their ports and PCI functions (/sys/class/infiniband)"),
    ("net", True, "network interfaces and their PCI functions (/sys/class/net)"),
    ("numa", True, "NUMA nodes, their CPUs, memory and distances (/sys/devices/system/node)"),
    ("nvml", True, "GPUs, NVLinks, P2P, fabric and MIG through NVML (nvidia-ml-py)"),
    ("pci", True, "PCI functions and the PCIe tree (/sys/bus/pci)"),
)
SOURCE_NAMES = tuple(name for name, _, _ in SOURCE_FLAGS)
