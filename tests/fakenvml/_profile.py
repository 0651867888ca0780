"""A machine profile (YAML, format in tests/machines/README.md) loaded into one :class:`Machine`.

Both views of the machine come from it: the sysfs tree (:mod:`._sysfs`) and the NVML answers
(:mod:`._nvml`), so the two agree the way they do on the real machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from topology import parse_cpulist

from ._catalog import NVLINK_VERSION_ENUM, P2P_CAPS, P2P_STATUS
from ._tree import Function, HostBridge, ProfileError, TreeBuilder

_GPU_DEFAULTS: dict[str, Any] = {"class": 0x030200, "subsystem": 0x0000, "memory_mib": 16384,
                                 "compute_capability": [8, 0], "architecture": "ampere"}
_NIC_DEFAULTS: dict[str, Any] = {"vendor": 0x15B3, "device_id": 0x1021, "class": 0x020700, "gen": 5,
                                 "rate": "400 Gb/sec (4X NDR)", "link_layer": "InfiniBand", "state": "ACTIVE"}
_NVSWITCH_DEFAULTS: dict[str, Any] = {"class": 0x068000, "device_id": 0x22A3}
_DEVICE_DEFAULTS: dict[str, Any] = {"class": 0x010802, "vendor": 0x144D, "device_id": 0xA80A}
_P2P_NVLINK = {"read": "OK", "write": "OK", "nvlink": "OK", "atomics": "OK", "pci": "OK"}
_P2P_PCIE = {"read": "OK", "write": "OK", "nvlink": "NOT_SUPPORTED", "atomics": "NOT_SUPPORTED", "pci": "OK"}


@dataclass(frozen=True)
class NumaSpec:
    node: int
    cpus: tuple[int, ...]
    memory_bytes: int
    gpu_memory: bool


@dataclass(frozen=True)
class Machine:
    name: str
    path: Path
    raw: Mapping[str, Any]  # the YAML document, defaults not applied
    platform: str
    cpus: tuple[int, ...]
    numa: tuple[NumaSpec, ...]
    distance: tuple[tuple[int, ...], ...]
    host_bridges: tuple[HostBridge, ...]
    functions: tuple[Function, ...]
    nvml: Mapping[str, Any]  # driver / nvml / cuda versions, nvlink plan, p2p, inject

    def of_kind(self, kind: str) -> tuple[Function, ...]:
        return tuple(sorted((f for f in self.functions if f.kind == kind), key=lambda f: f.bdf))

    @property
    def gpus(self) -> tuple[Function, ...]:
        """The GPUs NVML lists, in NVML index order (PCI bus id order): those bound to the nvidia driver
        (a GPU's ``driver`` attribute, default ``nvidia``) that the driver does not exclude (``excluded``)."""
        return tuple(f for f in self.driver_gpus if not f.spec.get("excluded"))

    @property
    def driver_gpus(self) -> tuple[Function, ...]:
        """The GPUs bound to the nvidia driver, excluded ones too: those /proc/driver/nvidia/gpus lists."""
        return tuple(f for f in self.of_kind("gpu") if f.spec.get("driver", "nvidia") == "nvidia")

    def minor(self, gpu: Function) -> int:
        """``/dev/nvidiaN``: the profile's ``minor``, else the GPU's place among the driver's GPUs."""
        return int(gpu.spec.get("minor", self.driver_gpus.index(gpu)))

    @property
    def nics(self) -> tuple[Function, ...]:
        return tuple(sorted(self.of_kind("nic"), key=lambda f: _nic_sort_key(str(f.spec.get("name", "")))))

    @property
    def nvswitches(self) -> tuple[Function, ...]:
        return self.of_kind("nvswitch")

    def numa_cpus(self, node: int) -> tuple[int, ...]:
        if node < 0:
            return self.cpus
        return next((n.cpus for n in self.numa if n.node == node), ())

    def gpu_uuid(self, gpu: Function) -> str:
        if "uuid" in gpu.spec:
            return str(gpu.spec["uuid"])
        h = hashlib.sha256(f"{self.name}/{gpu.bdf}".encode()).hexdigest()
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _nic_sort_key(name: str) -> tuple[str, int]:
    stem = name.rstrip("0123456789")
    digits = name[len(stem):]
    return stem, int(digits) if digits else -1


def load_machine(path: str | Path, overrides: Mapping[str, Any] | None = None) -> Machine:
    """Reads a profile; ``overrides`` are merged over the document's top level (for test variants)."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ProfileError(f"{path}: {exc}") from exc
    if not isinstance(doc, dict):
        raise ProfileError(f"{path}: a profile is a mapping")
    return build_machine({**doc, **(overrides or {})}, path)


def build_machine(doc: Mapping[str, Any], path: Path) -> Machine:
    where = str(path)
    numa = tuple(_numa(n, f"{where}: numa[{i}]") for i, n in enumerate(doc.get("numa") or ()))
    if not numa:
        raise ProfileError(f"{where}: at least one numa node")
    cpus = tuple(sorted({c for n in numa for c in n.cpus}))
    distance = _distance(doc.get("distance"), numa, where)
    defaults = {"gpu": {**_GPU_DEFAULTS, **(doc.get("gpu") or {})},
                "nic": {**_NIC_DEFAULTS, **(doc.get("nic") or {})},
                "nvswitch": {**_NVSWITCH_DEFAULTS, **(doc.get("nvswitch") or {})},
                "device": {**_DEVICE_DEFAULTS, **(doc.get("device") or {})},
                "switch": {"ids": tuple(doc.get("pcie_switch_ids") or (0x10B5, 0x9797))}}
    if "device_id" not in defaults["gpu"]:
        raise ProfileError(f"{where}: gpu.device_id is required")
    platform = str(doc.get("platform", "intel"))
    builder = TreeBuilder(defaults)
    for i, hb in enumerate(doc.get("pci") or ()):
        builder.add_host_bridge(hb, platform, f"{where}: pci[{i}]")
    functions = tuple(builder.functions)
    seen: set[str] = set()
    for f in functions:
        if f.bdf in seen:
            raise ProfileError(f"{where}: PCI address {f.bdf} used twice")
        seen.add(f.bdf)
    machine = Machine(name=str(doc.get("name", path.stem)), path=path, raw=doc, platform=platform, cpus=cpus,
                      numa=numa, distance=distance, host_bridges=tuple(builder.host_bridges),
                      functions=functions, nvml=_nvml_section(doc, where))
    _check_nvlink(machine, where)
    return machine


def _numa(spec: Mapping[str, Any], where: str) -> NumaSpec:
    try:
        return NumaSpec(node=int(spec["node"]), cpus=parse_cpulist(str(spec.get("cpus") or "")),
                        memory_bytes=int(float(spec.get("memory_gib", 0)) * 2**30),
                        gpu_memory=bool(spec.get("gpu_memory", False)))
    except (KeyError, ValueError, TypeError) as exc:
        raise ProfileError(f"{where}: {exc}") from exc


def _distance(spec: Any, numa: tuple[NumaSpec, ...], where: str) -> tuple[tuple[int, ...], ...]:
    if spec is None:
        return tuple(tuple(10 if a is b else 21 for b in numa) for a in numa)
    rows = tuple(tuple(int(v) for v in row) for row in spec)
    if len(rows) != len(numa) or any(len(r) != len(numa) for r in rows):
        raise ProfileError(f"{where}: distance must be {len(numa)}x{len(numa)}")
    return rows


def _nvml_section(doc: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    driver = doc.get("driver") or {}
    p2p = doc.get("p2p") or {}
    groups = {"nvlink": {**_P2P_NVLINK, **(p2p.get("nvlink") or {})},
              "pcie": {**_P2P_PCIE, **(p2p.get("pcie") or {})}}
    out = {"driver": str(driver.get("version", "")), "nvml": str(driver.get("nvml", "")),
           "cuda": int(driver.get("cuda", -1)), "nvlink": dict(doc.get("nvlink") or {}), "p2p": groups,
           "inject": list(doc.get("inject") or ()),
           "busy": {int(k): dict(v) for k, v in (doc.get("busy") or {}).items()}}
    for group in groups.values():
        for cap, status in group.items():
            if cap not in P2P_CAPS or status not in P2P_STATUS:
                raise ProfileError(f"{where}: p2p {cap}: {status} is not a caps index and P2P status")
    return out


def _check_nvlink(machine: Machine, where: str) -> None:
    nv = machine.nvml["nvlink"]
    if not nv:
        return
    if str(nv.get("version")) not in NVLINK_VERSION_ENUM:
        raise ProfileError(f"{where}: nvlink.version must be one of {', '.join(NVLINK_VERSION_ENUM)}")
    links = int(nv.get("links", 0))
    count = len(machine.gpus)
    used = [0] * count
    for pair in nv.get("pairs") or ():
        a, b, n = (int(x) for x in pair)
        if not (0 <= a < count and 0 <= b < count) or a == b:
            raise ProfileError(f"{where}: nvlink pair {pair} names a GPU that does not exist")
        used[a] += n
        used[b] += n
    if "switch_of_link" in nv:
        if len(nv["switch_of_link"]) > links:
            raise ProfileError(f"{where}: switch_of_link lists more links than nvlink.links")
        switches = len(machine.nvswitches)
        for s in nv["switch_of_link"]:
            if s != "sentinel" and not (isinstance(s, int) and 0 <= s < switches):
                raise ProfileError(f"{where}: switch_of_link entry {s!r} is not an NVSwitch index or 'sentinel'")
    if any(u > links for u in used):
        raise ProfileError(f"{where}: a GPU has more NVLink peers than nvlink.links = {links}")
