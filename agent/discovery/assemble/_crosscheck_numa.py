"""Cross-checks of NUMA placement that hold for every kind of device: a PCI function's ``numa_node`` against its
``local_cpus`` and against the node's own ``cpulist`` (a GPU's function, a NIC's, a bridge's, a switch port's
alike), and a GPU's memory node against the node it names. Pure; each check is one row of the witness table.

What the kernel guarantees: a function's ``numa_node`` is a node the kernel has (``-1``: none said), that node
holds the root complex and so has CPUs (memory-only nodes are GPU or CXL memory, never a bus's home), and its
``local_cpus`` is that node's CPU mask (some kernels give every CPU, then to every function) and names no CPU
the node list lacks.
A GPU's memory exposed as a NUMA node (GH200, GB200) is a node without CPUs that holds memory, one GPU's.
"""

from __future__ import annotations

from topology import NODE, Problem, Snapshot, format_cpulist

from ._witness import witness


def pci_numa(snap: Snapshot) -> list[Problem]:
    """Every PCI function whose ``numa_node`` names a node: the node exists, has CPUs, and the function's
    ``local_cpus`` are the node's CPUs or every CPU; no ``local_cpus`` names a CPU outside the nodes
    (node-wide NUMA is then unknown too: which reading is wrong is not known)."""
    if not snap.numa_nodes:
        return []
    row = witness("pci-numa-cpus")
    nodes = {n.os_index: n for n in snap.numa_nodes}
    every = {c for n in snap.numa_nodes for c in n.cpus}
    out: list[Problem] = []
    placed = [f for f in snap.pci if f.numa_node in nodes and f.local_cpus is not None]
    own = [f for f in placed if set(f.local_cpus or ()) == set(nodes[f.numa_node or 0].cpus) != every]
    for f in placed if own else ():  # one kernel, one convention: node masks for all, or every CPU for all
        if set(f.local_cpus or ()) == every != set(nodes[f.numa_node or 0].cpus):
            out.append(row.dispute((f.id, NODE), f"node {f.numa_node}", f"every CPU local, where {own[0].id} "
                                   "lists its node's CPUs (a kernel gives every function one kind of mask)"))
    for f in snap.pci:
        local = set(f.local_cpus) if f.local_cpus is not None else None
        stray = sorted(local - every) if local is not None else []
        if stray:
            out.append(row.dispute((f.id, NODE), f"local CPUs {format_cpulist(stray)}", "no node lists them"))
            continue
        if f.numa_node is None:
            continue
        node = nodes.get(f.numa_node)
        if node is None:
            out.append(row.dispute((f.id, NODE), f"node {f.numa_node}", "the kernel has no such node"))
        elif not node.cpus:
            out.append(row.dispute((f.id, NODE), f"node {f.numa_node}", f"{node.id} lists no CPU (a bus's home "
                                   "node has CPUs)"))
        elif local is not None and local != set(node.cpus) and local != every:
            out.append(row.dispute((f.id, NODE), f"node {f.numa_node}", f"local CPUs {format_cpulist(sorted(local))},"
                                   f" neither {node.id}'s CPUs {format_cpulist(node.cpus)} nor every CPU"))
    return out


def gpu_memory_node(snap: Snapshot) -> list[Problem]:
    """A GPU's memory node (``gpu_numa_id``) is a node of the node list, without CPUs, holding memory, and no
    other GPU's; every node marked as GPU memory (by NVML or the driver) is without CPUs and holds memory."""
    if not snap.numa_nodes:
        return []
    row = witness("gpu-memory-numa")
    nodes = {n.os_index: n for n in snap.numa_nodes}
    out = []
    for g in snap.gpus:
        if g.gpu_numa_id is None:
            continue
        node = nodes.get(g.gpu_numa_id)
        if node is None:
            out.append(row.dispute((g.id, NODE), f"memory node {g.gpu_numa_id}", "the kernel has no such node"))
        elif node.cpus:
            out.append(row.dispute((g.id, NODE), f"memory node {g.gpu_numa_id}", f"{node.id} lists CPUs "
                                   f"{format_cpulist(node.cpus)} (GPU memory is a node without CPUs)"))
        elif node.memory_bytes == 0:
            out.append(row.dispute((g.id, NODE), f"memory node {g.gpu_numa_id}", f"{node.id} holds no memory"))
    held: dict[int, str] = {}
    for g in snap.gpus:
        if g.gpu_numa_id is not None and held.setdefault(g.gpu_numa_id, g.id) != g.id:
            out.append(row.dispute((g.id, held[g.gpu_numa_id], NODE), f"{g.id}'s memory is node {g.gpu_numa_id}",
                                   f"so is {held[g.gpu_numa_id]}'s (one GPU's memory per node)"))
    for n in snap.numa_nodes:
        if n.gpu_memory and (n.cpus or n.memory_bytes == 0):
            out.append(row.dispute((NODE,), f"{n.id} holds a GPU's memory", "it lists CPUs" if n.cpus
                                   else "it holds no memory"))
    return out
