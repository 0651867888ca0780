"""NVLinks from NVML's per-link readings: one :class:`Link` per GPU pair and per GPU and NVSwitch. Pure.

Bonded links are counted once: the larger count of the two ends, a problem when the ends disagree
(``nvlink-ends``). A lost GPU carries no traffic: its links, read or half read, are left out. Links whose
remote is the sentinel ``FFFFFFFF:FF:FF.0`` go to one synthetic ``nvswitch0`` (not on PCI). Every link whose
far end cannot be placed is a problem that leaves the GPU's NVLinks unknown.
"""

from __future__ import annotations

from collections import defaultdict

from topology import (
    NODE,
    Aspect,
    Link,
    LinkKind,
    NvSwitch,
    Problem,
    Record,
    Snapshot,
    facts_of,
    nvlink_bytes_per_second,
)

from ..sources.nvml import REMOTE_GPU, REMOTE_SWITCH, REMOTE_UNKNOWN, NvLinkFact, NvmlFacts
from . import _counts
from ._nvml_state import SOURCE, SYNTHETIC_SWITCH
from ._witness import witness

_NVIDIA, _NVSWITCH_CLASS = 0x10DE, 0x0680


class _Ends(Record):
    """What a link's far end may be: the snapshot's GPUs, the lost ones, the NVSwitches found so far."""

    __slots__ = __match_args__ = ("snap", "gpus", "lost", "switches", "pci_ids", "pci_known")
    snap: Snapshot
    gpus: set[str]
    lost: set[str]
    switches: dict[str, NvSwitch]  # added to as links reach new ones
    pci_ids: set[str]
    pci_known: bool  # whether the PCI bus was read whole: a bus id it lacks is then nothing

    def __init__(self, *, snap: Snapshot, gpus: set[str], lost: set[str], switches: dict[str, NvSwitch],
                 pci_ids: set[str], pci_known: bool) -> None:
        self._fill(locals())


def nvlinks(snap: Snapshot, facts: NvmlFacts, placed: dict[int, str], switches: dict[str, NvSwitch],
            problems: list[Problem]) -> list[Link]:
    """The NVLinks NVML's GPUs report, placed by ``placed`` (NVML index -> bus id); ``switches`` gains the
    NVSwitches they reach, ``problems`` what could not be placed."""
    lost = {placed[g.index] for g in facts.gpus if g.lost and g.index in placed}
    ends = _Ends(snap=snap, gpus={g.id for g in snap.gpus} | set(placed.values()), lost=lost, switches=switches,
                 pci_ids={p.id for p in snap.pci}, pci_known=snap.knowledge().knows(NODE, Aspect.PCI))
    seen: dict[tuple[str, str], int] = defaultdict(int)  # (this end, other end) -> active links seen here
    versions: dict[frozenset[str], set[int]] = defaultdict(set)
    for g in facts.gpus:
        bus = placed.get(g.index)
        if bus is None or bus in lost:
            continue  # a lost GPU carries nothing: its links, read or half read, are left out
        sentinel = 0
        for link in g.links:
            if not link.active:
                continue
            if link.remote_sentinel:
                sentinel += 1
                if link.version is not None:
                    versions[frozenset((bus, SYNTHETIC_SWITCH))].add(link.version)
                continue
            remote = _far_end(bus, link, ends, problems)
            if remote is None:
                continue
            seen[(bus, remote)] += 1
            if link.version is not None:
                versions[frozenset((bus, remote))].add(link.version)
        if sentinel:
            switches.setdefault(SYNTHETIC_SWITCH, NvSwitch(id=SYNTHETIC_SWITCH, visible_on_pci=False))
            seen[(bus, SYNTHETIC_SWITCH)] = sentinel
        to_switches = sum(n for (a, b), n in seen.items() if a == bus and b in switches)
        if g.nvswitch_link_count is not None and (to_switches or g.nvswitch_link_count) \
                and to_switches != g.nvswitch_link_count:
            problems.append(witness("nvswitch-links").dispute((bus,), g.nvswitch_link_count, to_switches))
    walked = {placed[g.index] for g in facts.gpus if g.index in placed and not g.lost}
    return _links_from_counts(seen, versions, walked, problems)


def _far_end(bus: str, link: NvLinkFact, ends: _Ends, problems: list[Problem]) -> str | None:
    """The GPU or NVSwitch at the far end of ``bus``'s ``link``, or None (and a problem where it is one)."""
    remote = link.remote_bus_id
    if remote is None:
        return None  # unreadable: the GPU's NVLinks are unknown, a problem says so
    if remote == bus:
        problems.append(Problem(source=SOURCE, subject=bus, message=f"NVLink {link.link} goes to the GPU itself",
                                unknown=facts_of(bus, Aspect.NVLINKS)))
        return None
    if remote in ends.lost:
        problems.append(Problem(source=SOURCE, subject=bus, message=f"NVLink {link.link} goes to the lost GPU "
                                f"{remote}", unknown=facts_of(bus, Aspect.NVLINKS)))
        return None
    disputed = _counts.remote_type(bus, link.link, link.remote_type, remote, is_gpu=remote in ends.gpus,
                                   pci_switch=_pci_switch(ends.snap, remote), on_pci=remote in ends.pci_ids,
                                   pci_known=ends.pci_known)
    if disputed is not None:
        problems.append(disputed)
        return None
    to_switch = link.remote_type == REMOTE_SWITCH or (
        link.remote_type in (REMOTE_UNKNOWN, None) and (remote in ends.switches or _pci_switch(ends.snap, remote)))
    to_gpu = link.remote_type == REMOTE_GPU or remote in ends.gpus
    if to_gpu and not to_switch and remote not in ends.gpus:
        problems.append(Problem(source=SOURCE, subject=bus,
                                message=f"NVLink {link.link} goes to GPU {remote}, which is not among the "
                                        "GPUs: its NVLinks are unknown",
                                unknown=facts_of(bus, Aspect.NVLINKS)))
        return None
    if to_switch:
        ends.switches.setdefault(remote, NvSwitch(id=remote, visible_on_pci=remote in ends.pci_ids))
    elif not to_gpu:
        problems.append(Problem(source=SOURCE, subject=bus,
                                message=f"NVLink {link.link} goes to {remote} (remote type "
                                        f"{link.remote_type}), neither a GPU nor an NVSwitch: not modelled, "
                                        "its NVLinks unknown", unknown=facts_of(bus, Aspect.NVLINKS)))
        return None
    return remote


def _pci_switch(snap: Snapshot, bus_id: str) -> bool:
    f = next((p for p in snap.pci if p.id == bus_id), None)
    return f is not None and f.vendor_id == _NVIDIA and f.class_code >> 8 == _NVSWITCH_CLASS


def _links_from_counts(seen: dict[tuple[str, str], int], versions: dict[frozenset[str], set[int]],
                       walked: set[str], problems: list[Problem]) -> list[Link]:
    """One link per pair; where both ends are GPUs NVML walked, their counts must agree (none is 0)."""
    out = []
    done: set[frozenset[str]] = set()
    for (a, b), count in sorted(seen.items()):
        pair = frozenset((a, b))
        if pair in done:
            continue
        done.add(pair)
        other = seen.get((b, a), 0 if b in walked and a in walked else None)
        if other is not None and other != count:
            problems.append(witness("nvlink-ends").dispute((e for e in pair if ":" in e), f"{count} ({a})",
                                                           f"{other} ({b})"))
        bonded = max(count, other or 0)
        gen = _counts.generation(pair, versions.get(pair, set()), problems)
        lo, hi = sorted(pair)
        out.append(Link(a=lo, b=hi, kind=LinkKind.NVLINK, count=bonded, nvlink_version=gen,
                        bytes_per_second=nvlink_bytes_per_second(gen, bonded)))
    return out
