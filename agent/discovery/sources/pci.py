"""PCI functions and the PCIe tree, from ``/sys/bus/pci/devices``.

Each entry there links to the function's directory under ``/sys/devices``; that path is the PCIe tree:
``/sys/devices/pci0000:17/0000:17:00.0/0000:18:00.0/0000:19:04.0/0000:1a:00.0`` is a function below three
bridges below the root complex ``pci0000:17`` (the first component, as Kubernetes' ``pcieRoot``). Bridges
only in a path (partial copies of sysfs) are read from it; a bus id at two directories is a twin."""

from __future__ import annotations

import functools
import posixpath

from topology import (
    Aspect,
    BadPciAddress,
    Problem,
    Record,
    canonical_bdf,
    facts_of,
    host_bridge_id,
    node_fact,
    parse_cpulist,
    parse_cpumask,
)

from ..access import DiscoveryContext, FsRoot
from ._parse import bdf_key, driver_name, hex_int, host_bridge_dir, link_speed_gts, link_width, numa_node
from ._pci_config import read_acs
from ._registry import register
from ._sysfs import Reader, describe_os_error, list_subsystem, resolve_link, sysfs_bdf

SOURCE = "pci"
_DEVICES = "/sys/bus/pci/devices"
_SYS_DEVICES = "/sys/devices/"


class PciDeviceFacts(Record):
    """One function as read. ``None`` where sysfs did not say; required attributes missing are problems."""

    __slots__ = __match_args__ = ("bus_id", "parent", "host_bridge", "vendor_id", "device_id", "class_code",
                                  "numa_node", "local_cpus", "current_link_gts", "current_link_width", "max_link_gts",
                                  "max_link_width", "driver", "acs_redirect", "placed", "problems")
    bus_id: str
    parent: str  # upstream bridge's bus id, or the host bridge id when on a root bus
    host_bridge: str  # pciDDDD:BB
    vendor_id: int | None
    device_id: int | None
    class_code: int | None
    numa_node: int | None  # the kernel's -1 is None
    local_cpus: tuple[int, ...] | None
    current_link_gts: float | None
    current_link_width: int | None
    max_link_gts: float | None
    max_link_width: int | None
    driver: str | None
    acs_redirect: bool | None  # bridges: ACS P2P request redirect; None = could not read config space
    placed: bool  # False: its place in the tree is unknown (a problem says so)
    problems: tuple[Problem, ...]

    def __init__(self, *, bus_id: str, parent: str, host_bridge: str, vendor_id: int | None = None,
                 device_id: int | None = None, class_code: int | None = None, numa_node: int | None = None,
                 local_cpus: tuple[int, ...] | None = None, current_link_gts: float | None = None,
                 current_link_width: int | None = None, max_link_gts: float | None = None,
                 max_link_width: int | None = None, driver: str | None = None, acs_redirect: bool | None = None,
                 placed: bool = True, problems: tuple[Problem, ...] = ()) -> None:
        self._fill(locals())

    @property
    def is_bridge(self) -> bool:
        return self.class_code is not None and self.class_code >> 8 == 0x0604


class PciFacts(Record):
    """What the pci source read."""

    __slots__ = __match_args__ = ("devices", "problems", "twins")
    devices: tuple[PciDeviceFacts, ...]
    problems: tuple[Problem, ...]
    twins: tuple[tuple[str, tuple[str, ...]], ...]  # a bus id at two or more directories of the tree

    def __init__(self, *, devices: tuple[PciDeviceFacts, ...] = (), problems: tuple[Problem, ...] = (),
                 twins: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> None:
        self._fill(locals())


class _Place(Record):
    """A PCI function's directory, its parent, its host bridge and the problems reading them."""

    __slots__ = __match_args__ = ("path", "parent", "host_bridge", "problems", "placed")
    path: str  # the function's directory below the root
    parent: str
    host_bridge: str
    problems: tuple[Problem, ...]
    placed: bool  # False: the tree does not say where it sits (parent and root are placeholders)

    def __init__(self, *, path: str, parent: str, host_bridge: str, problems: tuple[Problem, ...],
                 placed: bool = True) -> None:
        self._fill(locals())


_IDENTITY = (Aspect.IDENTITY,)
_LINK = (Aspect.PCIE_LINK,)
_NUMA = (Aspect.NUMA,)
_PATH = (Aspect.PCIE_PATH,)
# A function whose class or vendor cannot be read might be a GPU or a NIC: the inventory is not known either.
_INVENTORY = (node_fact(Aspect.GPUS), node_fact(Aspect.NICS))


@register(SOURCE, covers=(Aspect.PCI, Aspect.GPUS), help="PCI functions and the PCIe tree (/sys/bus/pci)")
def read_pci(ctx: DiscoveryContext) -> PciFacts:
    root = ctx.root
    names = list_subsystem(root, _DEVICES, absent="no /sys/bus/pci", marker="/sys/bus/pci", most="pci")
    problems: list[Problem] = []
    places: dict[str, _Place] = {}
    gaps: dict[str, _Place] = {}
    dirs: dict[str, set[str]] = {}  # bus id -> every directory of the tree that names it
    for name in names:
        try:
            bdf = _bdf(name)
        except BadPciAddress:
            problems.append(Problem(source=SOURCE, subject=name, message=f"{_DEVICES}/{name}: not a PCI address",
                                    unknown=(node_fact(Aspect.PCI), *_INVENTORY)))
            continue
        place = _place(root, name, bdf, gaps)
        for up_bdf, up_path in ((bdf, places[bdf].path),) if bdf in places else ():
            dirs.setdefault(up_bdf, set()).add(up_path)
        places[bdf] = place
    for up_bdf, up_path in (c for place in places.values() for c in _tree_path(place.path)[1]):
        dirs.setdefault(up_bdf, set()).add(up_path)
    for bdf in gaps.keys() - places.keys():
        places[bdf] = gaps[bdf]
    shared = _Pass()
    devices = tuple(_read_device(root, bdf, places[bdf], shared) for bdf in sorted(places, key=bdf_key))
    twins = tuple((bdf, tuple(sorted(d))) for bdf, d in sorted(dirs.items()) if len(d) > 1)
    return PciFacts(devices=devices, problems=tuple(problems), twins=twins)


def _place(root: FsRoot, name: str, bdf: str, gaps: dict[str, _Place]) -> _Place:
    """Where the function sits: its directory, upstream bridge and root complex, from its sysfs path."""
    entry = f"{_DEVICES}/{name}"
    try:
        path = resolve_link(root, entry) or entry  # a link in real sysfs; a plain directory in some copies
    except OSError as exc:
        return _unplaced(bdf, entry, f"{entry}: {describe_os_error(exc)}: what it says is unknown")
    if not path.startswith(_SYS_DEVICES):
        return _unplaced(bdf, entry, f"{entry} is not linked into /sys/devices: its place in the PCIe tree is "
                                     "unknown")
    try:
        real_dir = root.is_plain_dir(path)  # sysfs device directories are no links
    except OSError:
        real_dir = False
    if not real_dir:
        return _unplaced(bdf, path, f"{path} is not the function's directory (missing, a file or a link): what "
                                    "it says is unknown")
    host_bridge, chain = _tree_path(path)
    found: list[Problem] = []
    placed = host_bridge is not None
    if host_bridge is None:
        host_bridge = host_bridge_id(*_domain_bus(bdf))
        found.append(_path_problem(bdf, f"no root complex in {path}"))
    if not chain or chain[-1][0] != bdf:
        return _unplaced(bdf, path, f"{path} does not end in the function: what it says is unknown")
    parent = host_bridge
    for up_bdf, up_path in chain[:-1]:
        if up_bdf not in gaps:
            gaps[up_bdf] = _Place(path=up_path, parent=parent, host_bridge=host_bridge, problems=())
        parent = up_bdf
    return _Place(path=path, parent=parent, host_bridge=host_bridge, problems=tuple(found), placed=placed)


@functools.lru_cache(maxsize=1024)
def _tree_path(path: str) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """The root complex (the first ``pciDDDD:BB``) of a ``/sys/devices`` path and the (bus id, directory) of
    every function on it, root side first. Pure, and asked for every function in every pass: remembered."""
    parts = path[len(_SYS_DEVICES):].split("/")
    host_bridge: str | None = None
    chain: list[tuple[str, str]] = []
    for i, part in enumerate(parts):
        root = host_bridge_dir(part)
        if root is not None and host_bridge is None and not chain:
            host_bridge = host_bridge_id(*root)
            continue
        if sysfs_bdf(part):  # else a non-PCI hop: a VMD domain's pciDDDD:BB below its controller
            chain.append((part, _SYS_DEVICES + "/".join(parts[: i + 1])))
    return host_bridge, tuple(chain)


def _unplaced(bdf: str, path: str, why: str) -> _Place:
    """A function whose directory cannot be trusted: where it sits and everything read there is unknown."""
    hb = host_bridge_id(*_domain_bus(bdf))
    # Bridges seen only on its path are unknown too, so the tree as a whole is not known.
    problem = Problem(source=SOURCE, subject=bdf, message=why,
                      unknown=(*facts_of(bdf, *_PATH, *_NUMA, *_IDENTITY, *_LINK), *_INVENTORY,
                               node_fact(Aspect.PCI)))
    return _Place(path=path, parent=hb, host_bridge=hb, problems=(problem,), placed=False)


def _path_problem(bdf: str, message: str) -> Problem:
    return Problem(source=SOURCE, subject=bdf, message=message, unknown=facts_of(bdf, *_PATH, *_NUMA))


def _domain_bus(bdf: str) -> tuple[int, int]:
    domain, bus, _ = bdf.split(":")
    return int(domain, 16), int(bus, 16)


def _read_device(root: FsRoot, bdf: str, place: _Place, shared: _Pass) -> PciDeviceFacts:
    r = Reader(root, SOURCE, bdf, place.path, list_first=shared.list_first)
    r.problems.extend(place.problems)
    before = len(r.problems)
    class_code = r.parsed("class", hex_int, _IDENTITY, required=True)
    vendor = r.parsed("vendor", hex_int, _IDENTITY, required=True)
    if len(r.problems) > before:  # not knowing what a function is hides whether it is a GPU or a NIC
        r.problems[before:] = [Problem(source=p.source, subject=p.subject, message=p.message,
                                       unknown=p.unknown + _INVENTORY) for p in r.problems[before:]]
    is_bridge = class_code is not None and class_code >> 8 == 0x0604
    facts = PciDeviceFacts(
        bus_id=bdf,
        parent=place.parent,
        host_bridge=place.host_bridge,
        vendor_id=vendor,
        device_id=r.parsed("device", hex_int, _IDENTITY, required=True),
        class_code=class_code,
        numa_node=r.parsed("numa_node", numa_node, _NUMA),
        local_cpus=_local_cpus(r, shared),
        current_link_gts=r.parsed("current_link_speed", link_speed_gts, _LINK),
        current_link_width=r.parsed("current_link_width", link_width, _LINK),
        max_link_gts=r.parsed("max_link_speed", link_speed_gts, _LINK),
        max_link_width=r.parsed("max_link_width", link_width, _LINK),
        driver=_driver(root, r, place.path, shared),
        acs_redirect=read_acs(r) if is_bridge else None,
        placed=place.placed,
        problems=tuple(r.problems),
    )
    shared.list_first = r.missed
    return facts


_bdf = functools.lru_cache(maxsize=1024)(canonical_bdf)  # pure; one that raises is not remembered
_DRIVERS = "/sys/bus/pci/drivers"


def _driver(root: FsRoot, r: Reader, directory: str, shared: _Pass) -> str | None:
    """The driver bound to the function: its ``driver`` link leads to ``/sys/bus/pci/drivers/<name>``.
    Decisions rest on it (a GPU for vfio-pci is not the host's, one bound to nvidia is NVML's), so a link
    that leads elsewhere, into a loop, or to a driver the tree's driver list lacks (a gathered tree without
    that list is trusted), or a ``driver`` that is no link, is a problem: which driver holds it is unknown."""
    if not r.present("driver"):
        return None
    try:
        target = resolve_link(root, f"{directory}/driver")
    except OSError as exc:
        r.problem(f"driver: {describe_os_error(exc)}: which driver holds it is unknown", _IDENTITY)
        return None
    head, name = posixpath.split(target or "")
    if target is None or head != _DRIVERS or not driver_name(name):
        r.problem(f"driver: {'not a link' if target is None else 'links to ' + target[:80]}, not to a driver in "
                  f"{_DRIVERS}: which driver holds it is unknown", _IDENTITY)
        return None
    if shared.drivers is None:
        shared.drivers = root.is_dir(_DRIVERS)
    if shared.drivers and not root.is_dir(target):
        r.problem(f"driver: links to {name}, which {_DRIVERS} does not list: which driver holds it is unknown",
                  _IDENTITY)
        return None
    return name


class _Pass:
    """What the functions of one pass share: the CPU mask and list parsers remember what they parsed (one
    that raises is not remembered); ``list_first``: the last function's directory lacked an attribute, so
    the next one is listed before it is read (functions of one tree tend to have the same attributes)."""

    __slots__ = ("cpulist", "cpumask", "drivers", "list_first")

    def __init__(self) -> None:
        self.cpumask = functools.lru_cache(maxsize=None)(parse_cpumask)
        self.cpulist = functools.lru_cache(maxsize=None)(parse_cpulist)
        self.list_first = False
        self.drivers: bool | None = None  # whether the tree has /sys/bus/pci/drivers (gathered ones may lack it)


def _local_cpus(r: Reader, parsers: _Pass) -> tuple[int, ...] | None:
    before = len(r.problems)
    mask = r.parsed("local_cpus", parsers.cpumask, _NUMA)
    if mask is not None or len(r.problems) > before:
        return mask  # a mask that is there but unreadable is a problem, not a reason to look elsewhere
    return r.parsed("local_cpulist", parsers.cpulist, _NUMA)
