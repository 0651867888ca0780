"""The physics table applied to a snapshot: every rate, generation, width and link count it holds against
what the hardware can do (``_physics``). One rulebook whatever the snapshot's source:

- a saved snapshot (``--from``, the agent's state, a probe report's) breaking a rule on a fact it says is
  known is refused, the field named (:func:`physical`, run by ``check``);
- live discovery turns each breach into a problem that leaves the fact unknown (``cross_check``), so what
  it writes is what the reader accepts;
- a measurement above what its path can carry is refused as measured (:func:`measured_breach`, used by the
  probes before a number joins a snapshot, and by ``_coherence`` on reading one).

The rules:
- an NVLink joins a GPU to a GPU or an NVSwitch, never a bridge, a NIC or a NUMA node;
- its generation is a row of the table ("unknown generation" otherwise), and a rate it carries is at most
  its links times the generation's per-link rate (a generation whose rate is not known bounds nothing, so
  no rate may be claimed for it);
- a GPU has at most its family's NVLinks (any GPU at most what NVML can name), of its family's generation;
- a PCIe state's generations are rows of the table and its widths ones the specification defines, and a
  PCIe link's rate is at most its best generation's lane rate times its widest width.
"""

from __future__ import annotations

from collections import defaultdict

from ..model._entities import LinkKind, PcieLinkState, Snapshot
from ..model._errors import SchemaError
from ..model._facts import Aspect, Knowledge
from ..model._measurement import Measurement
from ..model._record import Record
from ._physics import (
    MAX_NVLINKS_PER_GPU,
    NVLINK,
    PCIE,
    PCIE_WIDTHS,
    family_of_device,
    family_of_name,
    nvlink_ceiling,
    nvlink_generation,
    pcie_ceiling,
    pcie_generation,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if TYPE_CHECKING:
    from ._capability import LinkCapability  # its paths load only where a measurement is bounded

MEASURED_OVER_THEORETICAL = 1.5  # room for NVSwitch reductions (NVLS busbw) and rounding, never for 4x
_SLACK = 1 + 1e-9  # a rate written from the table, read back through JSON
_KNOWN_NVLINK = ", ".join(str(g.version) for g in NVLINK)
_KNOWN_PCIE = ", ".join(str(g.gen) for g in PCIE)
_GENS = frozenset((None, *(g.gen for g in PCIE)))
_WIDTHS = frozenset((None, *PCIE_WIDTHS))


class Breach(Record):
    """A number above what the links allow, and where it is."""

    __slots__ = __match_args__ = ("where", "subjects", "aspect", "source", "message")
    where: str  # the field, as the reader names it (snapshot.links[3].bytes_per_second)
    subjects: tuple[str, ...]  # whose fact it is
    aspect: Aspect  # which fact of theirs it makes unknown
    source: str  # the source whose reading it is
    message: str

    def __init__(self, *, where: str, subjects: tuple[str, ...], aspect: Aspect, source: str, message: str) -> None:
        self._fill(locals())


def _state_faults(s: PcieLinkState) -> list[tuple[str, str]]:
    """(field, why) for each generation no row has and each width no link has, of one PCIe state."""
    out = []
    for name in ("current_gen", "max_gen"):
        gen = getattr(s, name)
        if gen is not None and pcie_generation(gen) is None:
            out.append((name, f"PCIe Gen{gen}: unknown generation (the physics table knows {_KNOWN_PCIE})"))
    for name in ("current_width", "max_width"):
        width = getattr(s, name)
        if width is not None and width not in PCIE_WIDTHS:
            out.append((name, f"x{width} is no PCIe link width (x{', x'.join(map(str, PCIE_WIDTHS))})"))
    return out


def _usual(s: PcieLinkState | None) -> bool:
    """No breach in ``s``: the usual case, in a few lookups and no text (thousands of links have a state)."""
    return s is None or (s.current_gen in _GENS and s.max_gen in _GENS and s.current_width in _WIDTHS
                         and s.max_width in _WIDTHS)


def _pcie_state(where: str, subject: str, s: PcieLinkState | None, out: list[Breach]) -> None:
    if s is None or _usual(s):
        return
    out += [Breach(where=f"{where}.{name}", subjects=(subject,), aspect=Aspect.PCIE_LINK, source="pci", message=why)
            for name, why in _state_faults(s)]


def pcie_link_ceiling(s: PcieLinkState | None) -> float | None:
    """The most a PCIe link in state ``s`` carries per direction: its best generation, its widest width."""
    if s is None:
        return None
    gens = [g for g in (s.current_gen, s.max_gen) if g is not None]
    widths = [w for w in (s.current_width, s.max_width) if w is not None]
    return pcie_ceiling(max(gens), max(widths)) if gens and widths else None


def _nvlink(snap: Snapshot, out: list[Breach]) -> dict[str, int]:
    """NVLink links against the table; returns each GPU's NVLinks and notes the links' generations."""
    gpus = {g.id for g in snap.gpus}
    ends_ok = gpus | {s.id for s in snap.nvswitches}
    per_gpu: dict[str, int] = defaultdict(int)
    for i, link in enumerate(snap.links):
        if link.kind is not LinkKind.NVLINK:
            continue
        where = f"snapshot.links[{i}]"
        subjects = tuple(e for e in (link.a, link.b) if e in gpus) or (link.a, link.b)
        for end in (link.a, link.b):
            per_gpu[end] += link.count if end in gpus else 0
            if end not in ends_ok:
                out.append(Breach(where=where, subjects=subjects, aspect=Aspect.NVLINKS, source="nvml",
                                  message=f"an NVLink reaches {end}, which is neither a GPU nor an NVSwitch"))
        version = link.nvlink_version
        if version is not None and nvlink_generation(version) is None:
            out.append(Breach(where=f"{where}.nvlink_version", subjects=subjects, aspect=Aspect.NVLINKS,
                              source="nvml", message=f"NVLink {version}: unknown generation (the physics table "
                                                     f"knows {_KNOWN_NVLINK})"))
        if link.bytes_per_second is None:
            continue
        top = nvlink_ceiling(version, link.count)
        if top is None:
            out.append(Breach(where=f"{where}.bytes_per_second", subjects=subjects, aspect=Aspect.NVLINKS,
                              source="nvml", message=f"a rate for NVLink {version}, whose per-link rate is not "
                                                     "known: nothing bounds it"))
        elif link.bytes_per_second > top * _SLACK:
            out.append(Breach(where=f"{where}.bytes_per_second", subjects=subjects, aspect=Aspect.NVLINKS,
                              source="nvml", message=f"{link.bytes_per_second:.4g} B/s over {link.count} NVLink "
                                                     f"{version} links, which carry at most {top:.4g}"))
    return per_gpu


def _families(snap: Snapshot, per_gpu: dict[str, int], out: list[Breach]) -> None:
    versions: dict[str, set[int]] = defaultdict(set)
    for link in snap.links:
        if link.kind is LinkKind.NVLINK and link.nvlink_version is not None:
            versions[link.a].add(link.nvlink_version)
            versions[link.b].add(link.nvlink_version)
    for i, g in enumerate(snap.gpus):
        family = family_of_name(g.name) or family_of_device(g.pci_device_id)
        most = MAX_NVLINKS_PER_GPU if family is None else family.max_nvlinks
        what = "any GPU" if family is None else f"a GPU of the {family.name} family"
        if per_gpu.get(g.id, 0) > most:
            out.append(Breach(where=f"snapshot.gpus[{i}]", subjects=(g.id,), aspect=Aspect.NVLINKS, source="nvml",
                              message=f"{per_gpu[g.id]} NVLinks, and {what} has at most {most}"))
        if family is None or family.nvlink_version is None:
            continue
        wrong = sorted(versions.get(g.id, set()) - {family.nvlink_version})
        if wrong:
            out.append(Breach(where=f"snapshot.gpus[{i}]", subjects=(g.id,), aspect=Aspect.NVLINKS, source="nvml",
                              message=f"NVLink {wrong[0]}, and {what} has NVLink {family.nvlink_version}"))


def physics_breaches(snap: Snapshot) -> list[Breach]:
    """Every way ``snap`` breaks the physics table, in field order."""
    out: list[Breach] = []
    for i, g in enumerate(snap.gpus):
        _pcie_state(f"snapshot.gpus[{i}].pcie", g.id, g.pcie, out)
    # each distinct state judged once: equal states read back are one record (``topology.codec._decode``)
    states = {id(s): s for s in (*(f.link for f in snap.pci), *(lk.pcie for lk in snap.links))}
    judged = {key: (_usual(s), pcie_link_ceiling(s)) for key, s in states.items()}
    for i, f in enumerate(snap.pci):
        if not judged[id(f.link)][0]:  # the field's name written only for a breach
            _pcie_state(f"snapshot.pci[{i}].link", f.id, f.link, out)
    for i, link in enumerate(snap.links):
        if link.kind is not LinkKind.PCIE:
            continue
        usual, top = judged[id(link.pcie)]
        if not usual:
            _pcie_state(f"snapshot.links[{i}].pcie", link.a, link.pcie, out)
        if link.bytes_per_second is None:
            continue
        if top is None or link.bytes_per_second > top * _SLACK:
            bound = "nothing bounds it (no known generation and width)" if top is None else f"at most {top:.4g}"
            out.append(Breach(where=f"snapshot.links[{i}].bytes_per_second", subjects=(link.a,),
                              aspect=Aspect.PCIE_LINK, source="pci",
                              message=f"{link.bytes_per_second:.4g} B/s over PCIe: {bound}"))
    _families(snap, _nvlink(snap, out), out)
    return out


def physical(snap: Snapshot, k: Knowledge) -> None:
    """Raises :class:`SchemaError` at the first breach of a fact ``snap`` says is known (a breach whose fact
    a problem already leaves unknown is what live discovery writes, and stands)."""
    for b in physics_breaches(snap):
        if any(k.knows(s, b.aspect) for s in b.subjects):
            raise SchemaError(f"{b.where}: {b.message}")


def measured_breach(m: Measurement, cap: LinkCapability) -> str:
    """Why measurement ``m`` cannot be true of its path (above what its links carry, with the room
    :data:`MEASURED_OVER_THEORETICAL` leaves); empty when it can."""
    top = cap.of(m)
    if top is None or m.value <= top * MEASURED_OVER_THEORETICAL:
        return ""
    return (f"{m.value:.4g} {m.unit} measured, {m.value / top:.1f} times the {top:.4g} the links allow (at most "
            f"{MEASURED_OVER_THEORETICAL} times is believed)")
