"""How many of each thing a snapshot may hold: what ``--from`` and the state files refuse beyond (exit 3,
``_decode``) and what discovery refuses to read beyond (a failed source, its facts unknown). Imports
nothing, so a discovery source can read it without loading the codec."""

# How many entries a snapshot may list, per list. The largest nodes of today have 16 GPUs, a few dozen RDMA
# devices (more with SR-IOV functions), 18 NVSwitch chips, a few thousand PCI functions and links and 64
# NUMA nodes; each limit is well above that, and low enough that every command reading a snapshot at the
# limit ends within 2 s of CPU (``topo``'s matrix has a cell per pair of GPUs and NICs: benchmarks/limits.py).
MAX_GPUS = 256
MAX_NICS = 1024
MAX_PCI_FUNCTIONS = 32768
MAX_LINKS = 32768
SNAPSHOT_LIMITS: dict[str, int] = {
    "gpus": MAX_GPUS, "nics": MAX_NICS, "pci": MAX_PCI_FUNCTIONS, "links": MAX_LINKS,
    "nvswitches": 1024, "host_bridges": 4096, "numa_nodes": 1024,
}
