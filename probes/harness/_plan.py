"""The plan: which tests run between which endpoints, with what sizes and budgets. Pure: a function of
the snapshot, the profile and what the backend found (its capabilities); nothing is read or run here."""

from __future__ import annotations

from collections.abc import Collection

from topology import Snapshot

from ..core import (
    GRAPH,
    HOST,
    Capabilities,
    GiB,
    Item,
    Kind,
    MiB,
    Plan,
    ProbeError,
    ProbeSpec,
    Profile,
    Subjects,
    Target,
    Waiver,
    host_nodes,
    nccl_tests_command,
    specs_for,
)

# Host memory a child may use besides its buffers: the interpreter and libraries (torch for gloo;
# the CUDA driver's own host allocations for the cuda backend).
_BASE_MEMORY = {"cpu": 512 * MiB, "cuda": 16 * GiB}
_COLLECTIVE_BASE_MEMORY = {"cpu": 2 * GiB, "cuda": 16 * GiB}
_GPU_FLOOR_BYTES_PER_SECOND = 2e9  # the slowest GPU copy or collective a budget allows for
_SETUP_S = 20.0  # per item: allocation, pinning, peer access, communicator set-up


def make_plan(snap: Snapshot, profile: Profile, caps: Capabilities, *, tests: Collection[str] | None = None,
              force: bool = False) -> Plan:
    """Every test of ``caps.backend`` (or only ``tests``) between every applicable set of endpoints.

    A test that cannot run (no such device, no P2P access, busy GPU without ``force``, missing library)
    becomes a :class:`Waiver` with its reason, never an item. Without ``tests``, the profile's own
    selection runs (``quick`` runs a bounded subset; ``full`` and ``selftest`` run every test).
    """
    specs = specs_for(caps.backend)
    known = {s.name for s in specs}
    if tests is not None:
        unknown = sorted(set(tests) - known)
        if unknown:
            raise ProbeError(f"unknown test(s) for the {caps.backend} backend: {', '.join(unknown)}; "
                             f"choose from {', '.join(sorted(known))}")
    wanted = tests if tests is not None else profile.tests
    items: list[Item] = []
    waived: list[Waiver] = []
    for spec in specs:
        if wanted is not None and spec.name not in wanted:
            continue
        if caps.error:
            waived.append(Waiver(test=spec.name, subjects=(), reason=caps.error))
            continue
        endpoints = spec.endpoints(snap, profile)
        if not endpoints:
            waived.append(Waiver(test=spec.name, subjects=(), reason=spec.none_reason))
            continue
        missing = caps.why_unavailable(spec.name)
        for subjects in endpoints:
            others = spec.others(subjects, snap)
            reason = (_resolve_problem((*subjects, *others), snap, caps, force) or spec.check(subjects, snap, caps)
                      or missing)
            if reason:
                waived.append(Waiver(test=spec.name, subjects=subjects, reason=reason))
                continue
            items.append(_item(spec, subjects, snap, profile, caps))
    return Plan(profile=profile.name, backend=caps.backend, items=tuple(items), waived=tuple(waived))


def _resolve_problem(subjects: Subjects, snap: Snapshot, caps: Capabilities, force: bool) -> str | None:
    gpu_ids = {g.id for g in snap.gpus}
    for sid in subjects:
        if sid not in gpu_ids:
            continue
        dev = caps.device(sid)
        if dev is None:
            return f"GPU {sid} is not visible to the {caps.backend} backend (CUDA_VISIBLE_DEVICES, or no driver)"
        if dev.busy and not force:
            return f"GPU {sid} is busy ({dev.busy}); --force runs anyway"
    return None


def _targets(subjects: Subjects, snap: Snapshot, caps: Capabilities) -> tuple[Target, ...]:
    nodes = {n.id: n for n in host_nodes(snap)}
    nics = {n.id: n for n in snap.nics}
    out: list[Target] = []
    for sid in subjects:
        if sid in nodes:
            node = nodes[sid]
            out.append(Target(id=sid, kind="host", index=node.os_index, cpus=node.cpus))
        elif sid == HOST:
            out.append(Target(id=sid, kind="host"))
        elif sid in nics:
            out.append(Target(id=sid, kind="nic", name=nics[sid].name))
        else:
            dev = caps.device(sid)
            out.append(Target(id=sid, kind="gpu", index=dev.ordinal if dev else None))
    return tuple(out)


def _sizes(spec: ProbeSpec, subjects: Subjects, snap: Snapshot, profile: Profile) -> tuple[int, ...]:
    if spec.kind is Kind.COPY:
        host = spec.backend == "cpu" and profile.host_copy_bytes is not None
        return (profile.host_copy_bytes if host and profile.host_copy_bytes else profile.copy_bytes,)
    if spec.kind is Kind.LATENCY:
        return (profile.latency_bytes,)
    if spec.kind is Kind.RDMA:
        return (profile.rdma_bytes,)
    if spec.backend == "cpu":
        return profile.host_collective_sizes
    # Send and receive buffers of the largest size must fit in half of the smallest GPU's memory.
    memories = [g.memory_bytes for g in snap.gpus if g.id in subjects and g.memory_bytes]
    cap = min(memories) // 4 if memories else None
    fitting = tuple(s for s in profile.collective_sizes if cap is None or s <= cap)
    return fitting or profile.collective_sizes[:1]


def _item(spec: ProbeSpec, subjects: Subjects, snap: Snapshot, profile: Profile, caps: Capabilities) -> Item:
    sizes = _sizes(spec, subjects, snap, profile)
    floor = profile.floor_bytes_per_second if spec.backend == "cpu" else _GPU_FLOOR_BYTES_PER_SECOND
    base = _BASE_MEMORY[spec.backend]
    others = spec.others(subjects, snap)
    samples = profile.samples
    if spec.kind is Kind.COPY:
        warmup, iters = profile.copy_warmup, profile.copy_iters
        copies = _copies(spec, others)
        moved = sum(sizes) * (warmup + iters) * profile.samples * copies
        wall = _SETUP_S + moved / floor + 3 * sum(sizes) * profile.samples * copies / floor  # + resets, checks
        memory = base + 2 * max(sizes) * copies
    elif spec.kind is Kind.LATENCY:
        warmup, iters = profile.latency_warmup, profile.latency_accesses
        wall = _SETUP_S + (warmup + iters) * profile.samples * profile.floor_seconds_per_access
        memory = base + 2 * max(sizes)
    elif spec.kind is Kind.COLLECTIVE:
        warmup, iters = profile.collective_warmup, profile.collective_iters
        if spec.backend == "cuda":  # NCCL as nccl-tests: one window per cell unless the profile says more
            samples = profile.collective_samples
        # each rank sends and receives about 2 x S per operation, in every mode
        launches = profile.collective_graph_launches if profile.collective_timing == GRAPH else 1
        moved = sum(sizes) * (warmup + iters * launches + 1) * samples * 2 * len(spec.channels)
        wall = 3 * _SETUP_S + moved / floor
        memory = _COLLECTIVE_BASE_MEMORY[spec.backend] + 4 * max(sizes)
    else:
        warmup, iters = 0, profile.rdma_iters
        wall = 3 * _SETUP_S + 2 * sum(sizes) * iters * profile.samples / floor  # a loopback fallback runs again
        memory = base
    options: tuple[tuple[str, str], ...] = ()
    if spec.kind is Kind.RDMA:
        options = _rdma_options(snap, subjects)
    elif spec.kind is Kind.COLLECTIVE and spec.backend == "cuda":
        command = nccl_tests_command(spec.name, sizes, len(subjects), iters=iters, warmup=warmup,
                                     timing=profile.collective_timing, launches=profile.collective_graph_launches)
        options = (("timing", profile.collective_timing),
                   ("graph_launches", str(profile.collective_graph_launches)), ("nccl_tests", command))
    return Item(
        key=f"{spec.name}[{','.join(subjects)}]", test=spec.name, targets=_targets(subjects, snap, caps),
        sizes=sizes, warmup=warmup, iters=iters, samples=samples, wall_budget_s=round(wall, 1),
        memory_budget_bytes=memory, options=options, background=_targets(others, snap, caps), profile=profile.name,
    )


def _copies(spec: ProbeSpec, others: Subjects) -> int:
    """Copies running at once, in units of the timed size (nvbandwidth's interfering copies are twice it)."""
    if spec.name.startswith(("all_to_one", "one_to_all")):  # one copy of the timed size per other GPU
        return max(1, len(others))
    interfering = len(others) // 2  # (node, GPU) per other GPU
    if spec.name.endswith("bidirectional_memcpy_sm") and spec.method.startswith("sm"):
        return 1 + interfering  # split-warp: one copy per GPU, both ways in one pair of buffers of the size
    if spec.name.startswith(("all_to_host", "host_to_all")):
        ways = 2 if "bidirectional" in spec.name else 1
        return 1 + 2 * (ways * interfering + ways - 1)
    if "bidirectional" in spec.name and len(spec.channels) == 1:  # one direction timed, the other interferes
        return 3
    return len(spec.channels)


def _rdma_options(snap: Snapshot, subjects: Subjects) -> tuple[tuple[str, str], ...]:
    """How perftest registers GPU memory, and the NIC the writer uses: another RDMA NIC with an active
    port on the same link layer when the node has one (the data then crosses the wire), else the same NIC
    (loopback: it reads the host buffer and writes the GPU's memory, and the report says so)."""
    gdr = snap.gdr
    peer = gdr.peermem_loaded or bool(gdr.memory_peers)
    options = [("registration", "dmabuf" if not peer and gdr.dmabuf_supported else "peermem")]
    nics = {n.id: n for n in snap.nics}
    target = nics.get(subjects[1])
    layers = {p.link_layer for p in target.ports if p.state == "ACTIVE"} if target else set()
    writers = sorted((n for n in snap.nics if n.rdma and n.id != subjects[1]
                      and any(p.state == "ACTIVE" and p.link_layer in layers for p in n.ports)),
                     key=lambda n: n.name)
    if writers:
        options.append(("writer_nic", writers[0].name))
    return tuple(options)
