"""``structure``: a document's numbers and links agree with the structure they describe, and every identity
names one thing. Each rule is one live discovery keeps by construction (it writes these values from the
structure, or reads them from one register of a fixed width), so a document breaking one was edited or made
elsewhere and is refused whole, the field named. Found by the sweep over saved documents
(``tests/test_saved_sweep.py``), which edits every value of every test machine's snapshot.

- A link carries only the numbers of its kind: PCIe state on a PCIe link, a distance on a NUMA link, a
  generation and more than one lane on an NVLink; a NUMA link joins two NUMA nodes, at the distance the
  ``numa_distance`` matrix gives them.
- A link's rate is the one the physics table gives for what it says: its PCIe state's current generation
  and width, or its NVLinks' generation and count (``topology.fabric``'s rates, which discovery writes).
- A PCI function's parent is a bridge or a host bridge, and its chain of parents ends at a host bridge.
- Identities: a NUMA node is ``numa<os_index>``, a host bridge ``pci<domain>:<bus>``; NICs have distinct
  names and network interfaces; an NVIDIA GPU on the PCI bus is one of the GPUs (``PciFunction.is_gpu``,
  the rule discovery finds GPUs by); an NVML index is below the number of GPUs.
- Registers: vendor and device ids are 16 bits, a class code 24, a bus number 8, a domain 32; the GPU's
  minor number is at most 255 (``/dev/nvidia<minor>``), its fabric clique and health mask 32-bit.
"""

from __future__ import annotations

import math
import re

from ..fabric._paths import NVML_TOPOLOGY_LEVEL
from ..fabric._rates import nvlink_bytes_per_second, pcie_bytes_per_second
from ..model._entities import Link, LinkKind, Snapshot
from ..model._errors import SchemaError
from ..model._facts import Aspect, Knowledge
from ..model._ids import BadPciAddress, canonical_bdf, host_bridge_id, numa_id
from ..model._text_bounds import shown

_SLACK = 1e-13  # a rate written from the table, read back through JSON (repr is exact; room for a v1 writer)
_U8, _U16, _U24, _U32 = (1 << 8) - 1, (1 << 16) - 1, (1 << 24) - 1, (1 << 32) - 1
_NOT_READ = -1.0  # a cell discovery could not read (and the diagonal)
# The values of NVML's enums a matrix holds: nvmlGpuTopologyLevel_t (INTERNAL 0 to SYSTEM 50) and
# nvmlGpuP2PStatus_t (OK 0 to UNKNOWN 6), from nvml.h.
_ENUMS = {"nvml_topology_level": frozenset({_NOT_READ, 0.0, *(float(v) for v in NVML_TOPOLOGY_LEVEL.values())}),
          "nvml_p2p_status": frozenset({_NOT_READ, *(float(v) for v in range(7))}),
          "slit": frozenset(float(v) for v in range(10, 256))}  # ACPI SLIT: one byte, 10 for a node itself


_KIND = {kind: kind.value for kind in LinkKind}


def _in(where: str, value: int | None, top: int) -> None:
    if value is not None and not 0 <= value <= top:
        raise SchemaError(f"{where}: {value!r} is outside 0..{top} (the register it is read from)")


def structure(snap: Snapshot, k: Knowledge, *, v1: bool = False) -> None:
    """Raises SchemaError at the first number or identity that disagrees with the structure of ``snap``."""
    _registers(snap)
    _matrices(snap)
    _identities(snap, k)
    _copies(snap)
    _links(snap, v1=v1)
    _parents(snap, k)


def _registers(snap: Snapshot) -> None:
    for i, f in enumerate(snap.pci):
        if ((f.vendor_id is None or 0 <= f.vendor_id <= _U16) and (f.device_id is None or 0 <= f.device_id <= _U16)
                and (f.class_code is None or 0 <= f.class_code <= _U24)):
            continue  # the usual case, no text built; else the checks below name the field
        _in(f"snapshot.pci[{i}].vendor_id", f.vendor_id, _U16)
        _in(f"snapshot.pci[{i}].device_id", f.device_id, _U16)
        _in(f"snapshot.pci[{i}].class_code", f.class_code, _U24)
    for i, h in enumerate(snap.host_bridges):
        _in(f"snapshot.host_bridges[{i}].domain", h.domain, _U32)
        _in(f"snapshot.host_bridges[{i}].bus", h.bus, _U8)
    for i, g in enumerate(snap.gpus):
        _in(f"snapshot.gpus[{i}].minor", g.minor, _U8)
        _in(f"snapshot.gpus[{i}].pci_device_id", g.pci_device_id, _U16)
        if g.fabric is not None:
            _in(f"snapshot.gpus[{i}].fabric.clique_id", g.fabric.clique_id, _U32)
            _in(f"snapshot.gpus[{i}].fabric.health_mask", g.fabric.health_mask, _U32)
        if g.compute_capability is not None:
            _in(f"snapshot.gpus[{i}].compute_capability[0]", g.compute_capability[0], _U8)
            _in(f"snapshot.gpus[{i}].compute_capability[1]", g.compute_capability[1], _U8)
    for i, s in enumerate(snap.nvswitches):
        _in(f"snapshot.nvswitches[{i}].pci_device_id", s.pci_device_id, _U16)
    for i, nic in enumerate(snap.nics):
        for j, p in enumerate(nic.ports):
            _in(f"snapshot.nics[{i}].ports[{j}].number", p.number, _U8)


def _matrices(snap: Snapshot) -> None:
    for i, m in enumerate(snap.matrices):
        allowed = _ENUMS.get(m.unit)
        if allowed is None:
            continue
        for r, row in enumerate(m.values):
            bad = next((c for c, v in enumerate(row) if v not in allowed), None)
            if bad is not None:
                raise SchemaError(f"snapshot.matrices[{i}].values[{r}][{bad}]: {row[bad]!r} is no {m.unit} "
                                  f"({', '.join(f'{v:g}' for v in sorted(allowed))})")


def _links(snap: Snapshot, *, v1: bool) -> None:
    numa = {n.id for n in snap.numa_nodes}
    distances = snap.matrix("numa_distance")
    at = {x: i for i, x in enumerate(distances.ids)} if distances is not None else {}
    seen: dict[str, int] = {}
    for i, link in enumerate(snap.links):
        kind, a, b = link.kind, link.a, link.b
        key = f"{_KIND[kind]}:{a}--{b}" if a <= b else f"{_KIND[kind]}:{b}--{a}"  # link.id, with no call
        if seen.setdefault(key, i) != i:
            raise SchemaError(f"snapshot.links[{i}]: {link.id} is also snapshot.links[{seen[link.id]}]: "
                              "one link listed twice")
        if not ((link.pcie is None or kind is LinkKind.PCIE) and (link.numa_distance is None or kind is LinkKind.NUMA)
                and ((link.nvlink_version is None and link.count == 1) or kind is LinkKind.NVLINK)):
            _stray_number(f"snapshot.links[{i}]", link)  # the usual case passes above, no text built
        if kind is LinkKind.NUMA:
            stray = next((e for e in (link.a, link.b) if e not in numa), None)
            if stray is not None:
                raise SchemaError(f"snapshot.links[{i}]: a NUMA link from {link.a!r} to {link.b!r}: {stray!r} "
                                  "is no NUMA node")
            if link.a in at and link.b in at and distances is not None and link.numa_distance is not None \
                    and distances.values[at[link.a]][at[link.b]] != link.numa_distance:
                raise SchemaError(f"snapshot.links[{i}].numa_distance: {link.numa_distance}, and the numa_distance "
                                  "matrix says "
                                  f"{distances.values[at[link.a]][at[link.b]]:g}")
        if v1:
            continue
        if kind is LinkKind.PCIE:
            s = link.pcie
            rate = pcie_bytes_per_second(s.current_gen, s.current_width) if s is not None else None
        elif kind is LinkKind.NVLINK:
            rate = nvlink_bytes_per_second(link.nvlink_version, link.count)
        else:
            continue
        got = link.bytes_per_second
        if (got is None) != (rate is None) or (got is not None and rate is not None
                                               and not math.isclose(got, rate, rel_tol=_SLACK)):
            raise SchemaError(f"snapshot.links[{i}].bytes_per_second: {got!r}, and the physics table gives {rate!r} "
                              "for the "
                              f"{kind.value} link it describes")


def _stray_number(where: str, link: Link) -> None:
    """Raises at the first number ``link`` carries that only another kind of link has."""
    kind = link.kind
    for name, holds, own in (("pcie", link.pcie is not None, LinkKind.PCIE),
                             ("numa_distance", link.numa_distance is not None, LinkKind.NUMA),
                             ("nvlink_version", link.nvlink_version is not None, LinkKind.NVLINK),
                             ("count", link.count != 1, LinkKind.NVLINK)):
        if holds and kind is not own:
            raise SchemaError(f"{where}.{name}: a {kind.value} link has no {name} (only a {own.value} link does)")


def _parents(snap: Snapshot, k: Knowledge) -> None:
    funcs = {f.id: f for f in snap.pci}
    roots = {h.id for h in snap.host_bridges}
    ends: set[str] = set()  # functions whose chain of parents is known to end (no cycle)
    for i, f in enumerate(snap.pci):
        if not k.knows(f.id, Aspect.PCIE_PATH):
            continue
        parent = funcs.get(f.parent)
        if parent is not None and parent.class_code and not parent.is_bridge:  # 0: a class not read
            raise SchemaError(f"snapshot.pci[{i}].parent: {f.parent!r} is no bridge (class "
                              f"{parent.class_code:06x}), so nothing sits below it")
        domain, bus, *_ = f"{f.id}::".split(":")  # a canonical bus id (_identities), "dddd:bb:dd.f"
        if parent is not None and (parent.id.split(":")[0] != domain or parent.id.split(":")[1] >= bus):
            raise SchemaError(f"snapshot.pci[{i}].parent: {f.id} sits on a bus below {f.parent}'s, in its domain")
        if f.parent in roots and f.parent != f"pci{domain}:{bus}":
            raise SchemaError(f"snapshot.pci[{i}].parent: {f.id} is on bus {domain}:{bus}, not {f.parent}'s")
        cur, seen = f.parent, {f.id}
        while cur in funcs and cur not in seen and cur not in ends:
            seen.add(cur)
            cur = funcs[cur].parent
        if cur in seen:  # a parent the snapshot does not list ends the chain: _references names that one
            raise SchemaError(f"snapshot.pci[{i}].parent: the chain of parents from {f.id} comes back to {cur}")
        ends |= seen  # each function's chain walked once: a chain through one of these ends as its does


def _copies(snap: Snapshot) -> None:
    """A GPU's and a NIC's NUMA node, and a NIC's driver, are its PCI function's: discovery copies them."""
    funcs = {f.id: f for f in snap.pci}
    copies: list[tuple[str, str, object, object]] = []
    for i, g in enumerate(snap.gpus):
        if (f := funcs.get(g.id)) is not None:
            copies.append((f"snapshot.gpus[{i}].numa_node", g.id, g.numa_node, f.numa_node))
    for i, n in enumerate(snap.nics):
        if (f := funcs.get(n.id)) is not None:
            copies += [(f"snapshot.nics[{i}].numa_node", n.id, n.numa_node, f.numa_node),
                       (f"snapshot.nics[{i}].driver", n.id, n.driver, f.driver)]
    for where, bdf, mine, its in copies:
        if mine != its:
            raise SchemaError(f"{where}: {shown(repr(mine))}, and its PCI function {bdf}'s is {shown(repr(its))}")


# What canonical_bdf writes, and nothing else: a domain of four hex digits, or up to eight without a leading 0
# (32 bits), a bus, a device up to 1f and a function up to 7, lower case (tests/test_read_work.py holds the two
# to each other). Matched by the regular expression engine alone, for all the functions at once.
_CANONICAL_BDF = re.compile(r"(?:[0-9a-f]{4}|[1-9a-f][0-9a-f]{4,7}):[0-9a-f]{2}:[01][0-9a-f]\.[0-7]")


def _canonical(bdf: str) -> bool:
    """A PCI address as discovery writes one: ``canonical_bdf(bdf) == bdf``."""
    try:
        return canonical_bdf(bdf) == bdf
    except BadPciAddress:
        return False


def _identities(snap: Snapshot, k: Knowledge) -> None:
    for what, ids in (("pci", [f.id for f in snap.pci]), ("gpus", [g.id for g in snap.gpus])):
        if all(map(_CANONICAL_BDF.fullmatch, ids)):
            continue  # the usual case, in one pass of C; else the first one not written so is named
        for i, bdf in enumerate(ids):
            if not _canonical(bdf):
                raise SchemaError(f"snapshot.{what}[{i}].id: {shown(bdf)} is no PCI address as discovery writes one")
    for i, nic in enumerate(snap.nics):
        if nic.pci_bus_id is not None and nic.id != nic.pci_bus_id:
            raise SchemaError(f"snapshot.nics[{i}].id: {shown(nic.id)}, yet its PCI function is {nic.pci_bus_id}")
    for i, n in enumerate(snap.numa_nodes):
        if n.id != numa_id(n.os_index):
            raise SchemaError(f"snapshot.numa_nodes[{i}].id: {n.id!r}, yet its os_index is {n.os_index}")
    for i, h in enumerate(snap.host_bridges):
        if h.id != host_bridge_id(h.domain, h.bus):
            raise SchemaError(f"snapshot.host_bridges[{i}].id: {h.id!r}, yet its domain and bus make "
                              f"{host_bridge_id(h.domain, h.bus)!r}")
    names: dict[str, str] = {}
    for i, nic in enumerate(snap.nics):
        own = {nic.name: "name", **{d: "netdevs" for d in nic.netdevs}}  # an interface's NIC is named for it
        for name, field in own.items():
            if name in names:
                raise SchemaError(f"snapshot.nics[{i}].{field}: {name!r} is also {names[name]}'s: one name, two NICs")
        names.update(dict.fromkeys(own, f"snapshot.nics[{i}]"))
    gpus = {g.id for g in snap.gpus}
    if k.knows("node", Aspect.GPUS) and k.knows("node", Aspect.PCI):
        said = {p.subject for p in snap.problems}  # a GPU the driver excludes is left out, with a problem
        for i, f in enumerate(snap.pci):
            if f.is_gpu and f.id not in gpus and f.id not in said:
                raise SchemaError(f"snapshot.pci[{i}]: {f.id} is an NVIDIA GPU on the PCI bus, and no GPU of "
                                  "the snapshot")
    if k.knows("node", Aspect.GPUS):
        for i, g in enumerate(snap.gpus):
            if g.index is not None and g.index >= len(snap.gpus):
                raise SchemaError(f"snapshot.gpus[{i}].index: {g.index}, and NVML numbers from 0 the "
                                  f"{len(snap.gpus)} GPUs the snapshot holds")
