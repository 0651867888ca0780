"""The physics table: what the hardware can do, one typed row per NVLink generation, PCIe generation and GPU
family. Pure data and lookups; every rate topolink reads, writes or measures is held to it
(``_physics_rules`` for snapshots, the discovery sources for live readings, ``_coherence`` for measurements).

Rates are per direction, decimal bytes per second. A generation with no row is an *unknown generation*,
and a row whose rate is ``None`` is a generation known to exist whose rate has no public figure yet: both
are said as a problem by whoever meets them, never a silent null. docs/reference.md's table is
:func:`physics_markdown` (a test keeps them equal).
"""

from __future__ import annotations

from ..model._record import Record

GB = 1e9


class NvlinkGeneration(Record):
    """One NVLink generation: its NVML names and rate per link."""

    __slots__ = __match_args__ = ("version", "nvml_enums", "per_link", "source")
    version: int  # NVLink generation (NVLink 1.0 is 1, 2.0 and 2.2 are 2, 3.0 and 3.1 are 3...)
    nvml_enums: tuple[int, ...]  # the nvmlNvlinkVersion_t values that name it
    per_link: float | None  # bytes per second, per direction, per link
    source: str

    def __init__(self, *, version: int, nvml_enums: tuple[int, ...], per_link: float | None, source: str) -> None:
        self._fill(locals())


class PcieGeneration(Record):
    """One PCIe generation: its transfer rate and bytes per lane after line coding."""

    __slots__ = __match_args__ = ("gen", "gts", "per_lane", "source")
    gen: int
    gts: float  # transfer rate per lane, GT/s (sysfs current_link_speed)
    per_lane: float  # bytes per second, per direction, per lane, after line coding
    source: str

    def __init__(self, *, gen: int, gts: float, per_lane: float, source: str) -> None:
        self._fill(locals())


class GpuFamily(Record):
    """A GPU model family: how NVML and the PCI ids name it, and its NVLinks."""

    __slots__ = __match_args__ = ("name", "pci_device_ids", "nvlink_version", "max_nvlinks", "source")
    name: str  # what NVML's product name says, as a whole word ("A100" in "NVIDIA A100-SXM4-40GB")
    pci_device_ids: tuple[int, ...]  # the PCI device ids (vendor 10de) of its boards
    nvlink_version: int | None  # None: no NVLink
    max_nvlinks: int  # NVLinks one GPU of it has at most
    source: str

    def __init__(self, *, name: str, pci_device_ids: tuple[int, ...], nvlink_version: int | None, max_nvlinks: int,
                 source: str) -> None:
        self._fill(locals())


NVLINK: tuple[NvlinkGeneration, ...] = (
    NvlinkGeneration(version=1, nvml_enums=(1,), per_link=20 * GB, source="P100 (NVLink 1.0): 4 links, 80 GB/s"),
    NvlinkGeneration(version=2, nvml_enums=(2, 3), per_link=25 * GB, source="V100: 6 links, 150 GB/s"),
    NvlinkGeneration(version=3, nvml_enums=(4, 5), per_link=25 * GB, source="A100: 12 links, 300 GB/s"),
    NvlinkGeneration(version=4, nvml_enums=(6,), per_link=25 * GB, source="H100: 18 links, 450 GB/s"),
    NvlinkGeneration(version=5, nvml_enums=(7,), per_link=50 * GB, source="B200, GB200: 18 links, 900 GB/s"),
    NvlinkGeneration(version=6, nvml_enums=(8,), per_link=None,
                     source="NVLink 6.0 (nvmlNvlinkVersion_t 8): no per-link figure published yet"),
)
PCIE: tuple[PcieGeneration, ...] = (
    PcieGeneration(gen=1, gts=2.5, per_lane=0.25 * GB, source="2.5 GT/s, 8b/10b"),
    PcieGeneration(gen=2, gts=5.0, per_lane=0.5 * GB, source="5 GT/s, 8b/10b"),
    PcieGeneration(gen=3, gts=8.0, per_lane=15.75 * GB / 16, source="8 GT/s, 128b/130b: x16 15.75 GB/s"),
    PcieGeneration(gen=4, gts=16.0, per_lane=31.5 * GB / 16, source="16 GT/s, 128b/130b: x16 31.5 GB/s"),
    PcieGeneration(gen=5, gts=32.0, per_lane=63.0 * GB / 16, source="32 GT/s, 128b/130b: x16 63.0 GB/s"),
    PcieGeneration(gen=6, gts=64.0, per_lane=121.0 * GB / 16, source="64 GT/s PAM4, FLIT: x16 about 121 GB/s"),
    PcieGeneration(gen=7, gts=128.0, per_lane=242.0 * GB / 16, source="128 GT/s PAM4, FLIT: x16 about 242 GB/s"),
)
PCIE_WIDTHS = (1, 2, 4, 8, 12, 16, 32)  # the link widths the PCIe specification defines
FAMILIES: tuple[GpuFamily, ...] = (
    GpuFamily(name="V100", pci_device_ids=(0x1DB1, 0x1DB5), nvlink_version=2, max_nvlinks=6, source="SXM2"),
    GpuFamily(name="A100", pci_device_ids=(0x20B0, 0x20B2, 0x20B5), nvlink_version=3, max_nvlinks=12,
              source="SXM4; PCIe boards bridge 12 links"),
    GpuFamily(name="A30", pci_device_ids=(0x20B7,), nvlink_version=3, max_nvlinks=4, source="NVLink bridge"),
    GpuFamily(name="A6000", pci_device_ids=(0x2230,), nvlink_version=3, max_nvlinks=4, source="NVLink bridge"),
    GpuFamily(name="H100", pci_device_ids=(0x2330, 0x2331), nvlink_version=4, max_nvlinks=18, source="SXM5"),
    GpuFamily(name="H200", pci_device_ids=(0x2335,), nvlink_version=4, max_nvlinks=18, source="SXM5"),
    GpuFamily(name="GH200", pci_device_ids=(0x2342,), nvlink_version=4, max_nvlinks=18, source="Grace Hopper"),
    GpuFamily(name="B200", pci_device_ids=(0x2901,), nvlink_version=5, max_nvlinks=18, source="HGX B200"),
    GpuFamily(name="GB200", pci_device_ids=(0x2941,), nvlink_version=5, max_nvlinks=18, source="NVL72 tray"),
    GpuFamily(name="RTX 4090", pci_device_ids=(0x2684,), nvlink_version=None, max_nvlinks=0, source="no NVLink"),
    GpuFamily(name="RTX 5090", pci_device_ids=(0x2B85,), nvlink_version=None, max_nvlinks=0, source="no NVLink"),
)
# What NVML can name for one GPU (NVML_NVLINK_MAX_LINKS): the bound for a GPU of no family above.
MAX_NVLINKS_PER_GPU = 36
# A bundle of links to one NVSwitch chip or one peer is at most what one GPU has.
MAX_NVLINKS_PER_BUNDLE = MAX_NVLINKS_PER_GPU

_BY_VERSION = {g.version: g for g in NVLINK}
_BY_ENUM = {e: g.version for g in NVLINK for e in g.nvml_enums}
_BY_GEN = {g.gen: g for g in PCIE}
_BY_GTS = {g.gts: g.gen for g in PCIE}
_BY_DEVICE = {d: f for f in FAMILIES for d in f.pci_device_ids}


def nvlink_generation(version: int | None) -> NvlinkGeneration | None:
    return None if version is None else _BY_VERSION.get(version)


def nvlink_version_of_enum(enum_value: int) -> int | None:
    """The generation an ``nvmlNvlinkVersion_t`` names; None for a value no row knows (unknown generation)."""
    return _BY_ENUM.get(enum_value)


def pcie_generation(gen: int | None) -> PcieGeneration | None:
    return None if gen is None else _BY_GEN.get(gen)


def pcie_gen_of_gts(gts: float) -> int | None:
    """The generation of a lane rate in GT/s; None for a rate no row knows (unknown generation)."""
    return _BY_GTS.get(round(gts, 1))


def nvlink_ceiling(version: int | None, links: int) -> float | None:
    """The most ``links`` NVLinks of ``version`` carry, per direction; None when no rate is known."""
    row = nvlink_generation(version)
    return None if row is None or row.per_link is None else row.per_link * links


def pcie_ceiling(gen: int | None, width: int | None) -> float | None:
    """The most a PCIe link of ``gen`` and ``width`` carries, per direction; None when either is unknown."""
    row = pcie_generation(gen)
    return None if row is None or width is None else row.per_lane * width


def family_of_name(name: str | None) -> GpuFamily | None:
    """The family NVML's product name names as a whole word; None for a name of no known family."""
    if not name:
        return None
    words = f" {name.replace('-', ' ').replace('_', ' ')} "
    found = [f for f in FAMILIES if f" {f.name} " in words]
    return max(found, key=lambda f: len(f.name)) if found else None


def family_of_device(device_id: int | None) -> GpuFamily | None:
    return None if device_id is None else _BY_DEVICE.get(device_id)


def physics_markdown() -> str:
    """docs/reference.md's physics table, generated from the rows."""
    lines = ["| NVLink | nvmlNvlinkVersion_t | per link, per direction | source |", "|---|---|---|---|"]
    for n in NVLINK:
        rate = "unknown generation (no rate)" if n.per_link is None else f"{n.per_link / GB:g} GB/s"
        lines.append(f"| {n.version} | {', '.join(map(str, n.nvml_enums))} | {rate} | {n.source} |")
    lines += ["", "| PCIe | GT/s | per lane, per direction | x16 | source |", "|---|---|---|---|---|"]
    for p in PCIE:
        lines.append(f"| Gen{p.gen} | {p.gts:g} | {p.per_lane / GB:.4g} GB/s | {p.per_lane * 16 / GB:.4g} GB/s "
                     f"| {p.source} |")
    lines += ["", "| GPU family | PCI device ids | NVLink | NVLinks per GPU at most | note |", "|---|---|---|---|---|"]
    for f in FAMILIES:
        ids = ", ".join(f"`{d:04x}`" for d in f.pci_device_ids)
        lines.append(f"| {f.name} | {ids} | {f.nvlink_version or 'none'} | {f.max_nvlinks} | {f.source} |")
    return "\n".join(lines) + "\n"
