"""Discovery writes only what the reader reads: a snapshot holds at most ``topology.SNAPSHOT_LIMITS`` of
each list, and the reader refuses a document over them (exit 3). The sources refuse most of it where they
read (a listing over the limit fails its source); what they cannot see alone is bounded here, on the
assembled snapshot: GPUs found on the PCI bus beyond the limit (NVML's count is bounded where it is read),
and links that many entities make together (NUMA nodes pairwise, PCIe functions, NVLinks). What is cut is
said in a problem that leaves its facts unknown, never dropped in silence. Pure."""

from __future__ import annotations

from topology import SNAPSHOT_LIMITS, Aspect, LinkKind, Problem, Snapshot, node_fact, replace

SOURCE = "discover"
# Links given up first when there are too many: the ones derived from other facts before the ones read.
_LINK_ORDER = (LinkKind.NUMA, LinkKind.NIC_PORT, LinkKind.C2C, LinkKind.PCIE, LinkKind.NVLINK)
_LINK_ASPECT = {LinkKind.NUMA: Aspect.NUMA, LinkKind.NIC_PORT: Aspect.NICS, LinkKind.C2C: Aspect.NVLINKS,
                LinkKind.PCIE: Aspect.PCI, LinkKind.NVLINK: Aspect.NVLINKS}


def _gpus(snap: Snapshot, problems: list[Problem]) -> Snapshot:
    most = SNAPSHOT_LIMITS["gpus"]
    if len(snap.gpus) <= most:
        return snap
    kept = sorted(snap.gpus, key=lambda g: (g.index is None, g.index or 0, g.id))[:most]
    ids = {g.id for g in kept}
    gone = {g.id for g in snap.gpus} - ids
    problems.append(Problem(source=SOURCE, subject="gpus", message=f"{len(snap.gpus)} GPUs, more than the {most} a "
                            f"snapshot may hold: {len(gone)} left out, which GPUs the node has is unknown",
                            unknown=(node_fact(Aspect.GPUS), node_fact(Aspect.NVLINKS), node_fact(Aspect.P2P))))
    matrices = []
    for m in snap.matrices:
        keep = [i for i, x in enumerate(m.ids) if x not in gone]
        matrices.append(m if len(keep) == len(m.ids) else replace(
            m, ids=tuple(m.ids[i] for i in keep), values=tuple(tuple(m.values[i][j] for j in keep) for i in keep)))
    return replace(snap, gpus=tuple(g for g in snap.gpus if g.id in ids), matrices=tuple(matrices),
                   links=tuple(lk for lk in snap.links if lk.a not in gone and lk.b not in gone),
                   measurements=tuple(x for x in snap.measurements if not gone & set(x.subjects)))


def _links(snap: Snapshot, problems: list[Problem]) -> Snapshot:
    most = SNAPSHOT_LIMITS["links"]
    links = list(snap.links)
    for kind in _LINK_ORDER:
        if len(links) <= most:
            break
        mine = [lk for lk in links if lk.kind is kind]
        if not mine:
            continue
        links = [lk for lk in links if lk.kind is not kind]
        problems.append(Problem(source=SOURCE, subject="links", message=f"more links than the {most} a snapshot may "
                                f"hold: the {len(mine)} {kind.value} links left out, unknown",
                                unknown=(node_fact(_LINK_ASPECT[kind]),)))
    return snap if len(links) == len(snap.links) else replace(snap, links=tuple(links))


def bounded(snap: Snapshot) -> Snapshot:
    """``snap`` within the limits the reader keeps, with a problem for what was left out."""
    problems: list[Problem] = []
    snap = _links(_gpus(snap, problems), problems)
    if not problems:
        return snap
    return replace(snap, problems=tuple(sorted({*snap.problems, *problems},
                                               key=lambda p: (p.source, p.subject, p.message))))
