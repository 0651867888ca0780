"""A tolerant reader of real ``nvidia-smi topo -m`` outputs (``tests/data/topo/*.txt``).

Copes with what pasted outputs look like: tabs or runs of spaces, the old format (NIC names such as
``mlx5_0`` as column headers, no NUMA columns), the ``NIC Legend`` block, empty cells (``\\t\\t``), and
text before and after the table (only the first table in a file is read). Cells are kept as printed
(``X``, ``NV12``, ``PIX`` ...); device names are the headers (``GPU0``, ``NIC3``, ``mlx5_0``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.reference_data import TOPO as REFERENCE_TOPO

_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_CELL = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
_LEGEND = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")


@dataclass(frozen=True)
class TopoReference:
    path: Path
    devices: tuple[str, ...]  # matrix columns in order
    cells: dict[tuple[str, str], str]  # (row, column) -> cell as printed
    columns: tuple[str, ...]  # affinity columns present in the header
    cpu_affinity: dict[str, str]
    numa_affinity: dict[str, str]
    gpu_numa_id: dict[str, str]  # "N/A" kept as printed
    nic_legend: dict[str, str]  # NIC0 -> mlx5_0; old format: mlx5_0 -> mlx5_0

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if re.fullmatch(r"GPU\d+", d))

    @property
    def nics(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if not re.fullmatch(r"GPU\d+", d))

    def cell(self, row: str, column: str) -> str:
        return self.cells[(row, column)]


def _header(line: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    text = line.strip()
    if not text.startswith("GPU0"):
        return None
    columns = tuple(c for c in _AFFINITY_COLUMNS if c in text)
    for name in columns:
        text = text.replace(name, " ")
    devices = tuple(text.split())
    if not devices or not all(re.fullmatch(r"GPU\d+|NIC\d+|[A-Za-z][\w.-]*\d", d) for d in devices):
        return None
    return devices, columns


def _rows(lines: list[str], devices: tuple[str, ...], columns: tuple[str, ...],
          path: Path) -> tuple[dict[tuple[str, str], str], dict[str, dict[str, str]]]:
    cells: dict[tuple[str, str], str] = {}
    extras: dict[str, dict[str, str]] = {name: {} for name in _AFFINITY_COLUMNS}
    for line in lines:
        tokens = line.split()
        if not tokens or tokens[0] not in devices:
            break
        row, rest = tokens[0], tokens[1:]
        values = rest[: len(devices)]
        if len(values) < len(devices) or not all(_CELL.match(v) for v in values):
            raise ValueError(f"{path}: row {row}: cannot read {len(devices)} cells from {line!r}")
        for column, value in zip(devices, values, strict=True):
            cells[(row, column)] = value
        for name, value in zip(columns, rest[len(devices):], strict=False):
            extras[name][row] = value
    return cells, extras


def parse(text: str, path: Path = Path("<text>")) -> TopoReference:
    lines = text.splitlines()
    for start, line in enumerate(lines):
        found = _header(line)
        if found is None:
            continue
        devices, columns = found
        cells, extras = _rows(lines[start + 1:], devices, columns, path)
        if cells:
            break
    else:
        raise ValueError(f"{path}: no topo -m table (a GPU0 header line followed by device rows)")
    legend = {m.group(1): m.group(2) for line in lines if (m := _LEGEND.match(line))}
    if not legend and not any(d.startswith("NIC") for d in devices):
        legend = {d: d for d in devices if not d.startswith("GPU")}  # old format: names are the headers
    return TopoReference(path=path, devices=devices, cells=cells, columns=columns,
                         cpu_affinity=extras["CPU Affinity"], numa_affinity=extras["NUMA Affinity"],
                         gpu_numa_id=extras["GPU NUMA ID"], nic_legend=legend)


def load(name: str | Path) -> TopoReference:
    """A reference by file name in tests/data/topo, or by path."""
    path = Path(name)
    if not path.is_absolute() and not path.exists():
        path = REFERENCE_TOPO / path
    return parse(path.read_text(), path)
