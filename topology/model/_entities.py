"""The entities of one node's topology (``_devices``): frozen, slotted, keyword-only records with canonical ids.

Ids: PCI functions, GPUs and NVSwitches use the lowercase full bus id (``0000:3b:00.0``); host bridges
``pciDDDD:BB`` (the sysfs root-complex directory); NUMA nodes ``numa<N>``; NICs their PCI bus id, or
``net:<ifname>`` for a virtual interface with no PCI function. Links are ``<kind>:<a>--<b>`` with the
endpoints sorted, so the same physical link has one id whichever end saw it.

A :class:`Snapshot` holds these entities beside the numbers on the graph (``_numbers``) and the record of
where facts came from and what could not be read (``_provenance``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from ._devices import (
    GPU_CLASSES,
    NVIDIA_VENDOR,
    FabricInfo,
    FabricState,
    GdrFacts,
    Gpu,
    HostBridge,
    Link,
    LinkKind,
    MigInstance,
    Nic,
    NicPort,
    NumaNode,
    NvSwitch,
    PcieLinkState,
    PciFunction,
    PlatformInfo,
    link_id,
)
from ._facts import Fact, Knowledge
from ._measurement import Matrix, Measurement
from ._provenance import Problem, SourceOutcome, SourceStatus
from ._record import Record

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    import threading
    from typing import Any, TypeVar

    T = TypeVar("T")

# The devices too: they are imported from here.
__all__ = ["GPU_CLASSES", "NVIDIA_VENDOR", "FabricInfo", "FabricState", "GdrFacts", "Gpu", "HostBridge", "Link",
           "LinkKind", "MigInstance", "Nic", "NicPort", "NumaNode", "NvSwitch", "PciFunction", "PcieLinkState",
           "PlatformInfo", "Snapshot", "kept_snapshots", "link_id", "per_snapshot"]

_NO_GDR = GdrFacts()  # records never change: one default serves every snapshot
_WHOLE = frozenset({SourceStatus.OK, SourceStatus.ABSENT})


class Snapshot(Record):
    """One node, frozen. Build new ones with :func:`topology.replace` or :func:`with_measurements`."""

    __match_args__ = ("node", "taken_at", "host_bridges", "pci", "numa_nodes", "gpus", "nvswitches", "nics", "links",
                      "matrices", "measurements", "gdr", "versions", "sources", "problems")
    __slots__ = (*__match_args__, "__weakref__")
    node: str
    taken_at: float | None
    host_bridges: tuple[HostBridge, ...]
    pci: tuple[PciFunction, ...]
    numa_nodes: tuple[NumaNode, ...]
    gpus: tuple[Gpu, ...]
    nvswitches: tuple[NvSwitch, ...]
    nics: tuple[Nic, ...]
    links: tuple[Link, ...]
    matrices: tuple[Matrix, ...]
    measurements: tuple[Measurement, ...]
    gdr: GdrFacts
    versions: tuple[tuple[str, str], ...]
    sources: tuple[SourceOutcome, ...]
    problems: tuple[Problem, ...]

    def __init__(self, *, node: str, taken_at: float | None = None, host_bridges: tuple[HostBridge, ...] = (),
                 pci: tuple[PciFunction, ...] = (), numa_nodes: tuple[NumaNode, ...] = (), gpus: tuple[Gpu, ...] = (),
                 nvswitches: tuple[NvSwitch, ...] = (), nics: tuple[Nic, ...] = (), links: tuple[Link, ...] = (),
                 matrices: tuple[Matrix, ...] = (), measurements: tuple[Measurement, ...] = (),
                 gdr: GdrFacts = _NO_GDR, versions: tuple[tuple[str, str], ...] = (),
                 sources: tuple[SourceOutcome, ...] = (), problems: tuple[Problem, ...] = ()) -> None:
        self._fill(locals())

    @property
    def unknown(self) -> frozenset[Fact]:
        """Every fact some problem leaves unknown."""
        return frozenset(f for p in self.problems for f in p.unknown)

    def knowledge(self) -> Knowledge:
        """``knowledge().knows(subject, aspect)``: build once, ask many times."""
        return Knowledge(self.unknown, nics=(n.id for n in self.nics))

    @property
    def complete(self) -> bool:
        """Nothing a ``topo -m`` cell, a label or a metric depends on is unknown. Sinks never delete on less.
        A fact is known only if a source read it: a snapshot no source read is not complete."""
        return bool(self.sources) and not self.unknown and all(o.status in _WHOLE for o in self.sources)

    def matrix(self, name: str) -> Matrix | None:
        return next((m for m in self.matrices if m.name == name), None)


_BY_SNAPSHOT: dict[int, dict[Hashable, Any]] = {}  # each entry is what its build returned
_LOCKS: dict[int, threading.RLock] = {}  # the one lock (reentrant: a build may ask for another entry of the same
# snapshot), made on first use: threading and weakref load only where a snapshot's derived entries are asked for


def _lock() -> threading.RLock:
    lock = _LOCKS.get(0)
    if lock is None:
        import threading

        lock = _LOCKS.setdefault(0, threading.RLock())  # setdefault is one step: two first callers get one lock
    return lock


def per_snapshot(snap: Snapshot, key: Hashable, build: Callable[[], T]) -> T:
    """``build()`` for this snapshot and key, built once, kept by ``snap``'s identity while it lives and shared by
    every view and sink around it; it depends on ``snap`` and ``key`` alone and must not hold ``snap``."""
    entries = _BY_SNAPSHOT.get(id(snap))
    if entries is not None and key in entries:
        found: T = entries[key]
        return found
    with _lock():  # one build per snapshot and key, even when two threads ask at once
        entries = _BY_SNAPSHOT.get(id(snap))
        if entries is None:
            import weakref

            entries = _BY_SNAPSHOT[id(snap)] = {}
            weakref.finalize(snap, _BY_SNAPSHOT.pop, id(snap), None)
        made: T = entries[key] if key in entries else entries.setdefault(key, build())
        return made


def kept_snapshots() -> int:
    """How many snapshots have entries now (entries go with their snapshot)."""
    return len(_BY_SNAPSHOT)
