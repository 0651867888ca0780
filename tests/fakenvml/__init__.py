"""A test NVML (a C library the unmodified nvidia-ml-py loads) and machine profiles that drive it.

A profile (``tests/machines/*.yaml``) describes one machine. :func:`materialize` turns it into what
discovery reads on the real machine: a sysfs tree and the NVML answers, plus the compiled library::

    node = materialize("tests/machines/hgx-h100.yaml", tmp_path)
    subprocess.run(["topolink", "topo"], env={**os.environ, **node.env()})

or from a shell: ``python -m tests.fakenvml run PROFILE.yaml -- topolink topo``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._build import BuildError, build_library
from ._nvml import nvml_bus_id, nvml_lines
from ._profile import Machine, load_machine
from ._synthetic import scaled_doc, write_scaled
from ._sysfs import write_sysfs
from ._tree import ProfileError

MACHINES = Path(__file__).resolve().parents[1] / "machines"

ENV_PROFILE = "TOPOLINK_FAKENVML_PROFILE"
ENV_CALLS = "TOPOLINK_FAKENVML_CALLS"
ENV_SYSFS_ROOT = "TOPOLINK_SYSFS_ROOT"
ENV_NVML_LIBRARY = "TOPOLINK_NVML_LIBRARY"


@dataclass(frozen=True)
class FakeNode:
    """A profile made real: ``root`` holds sys/ and proc/, ``nvml_library`` answers from ``nvml_profile``."""

    machine: Machine
    root: Path
    nvml_library: Path
    nvml_profile: Path
    calls_file: Path

    def env(self) -> dict[str, str]:
        """The environment a process needs to discover this machine."""
        return {ENV_SYSFS_ROOT: str(self.root), ENV_NVML_LIBRARY: str(self.nvml_library),
                ENV_PROFILE: str(self.nvml_profile), ENV_CALLS: str(self.calls_file)}

    def calls(self) -> dict[str, int]:
        """NVML calls of the last session (nvmlInit to nvmlShutdown), per ``function(args)``, in the order
        each was first made."""
        return read_calls(self.calls_file)


def read_calls(path: Path) -> dict[str, int]:
    rows: list[tuple[int, str, int]] = []
    if path.exists():
        for line in path.read_text().splitlines():
            count, first, key = line.split(" ", 2)
            rows.append((int(first), key, int(count)))
    return {key: count for _, key, count in sorted(rows)}


def gpus_named(call: str) -> tuple[int, ...]:
    """The NVML GPU indices a counted call names: ``nvmlDeviceGetP2PStatus(0,5,3)`` -> (0, 5)."""
    name, _, args = call.partition("(")
    if not args or not name.startswith("nvmlDevice") or name == "nvmlDeviceGetCount_v2":
        return ()
    parts = args.rstrip(")").split(",")
    pair = name in ("nvmlDeviceGetP2PStatus", "nvmlDeviceGetTopologyCommonAncestor")
    return tuple(int(p.split("/")[0]) for p in parts[: 2 if pair else 1] if p.split("/")[0].isdigit())


def profile_path(name: str | Path) -> Path:
    """A profile by file path, or by name in tests/machines (``"hgx-h100"``)."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    return MACHINES / f"{name}.yaml"


def materialize(profile: str | Path | Machine, workdir: Path, overrides: Mapping[str, Any] | None = None) -> FakeNode:
    """Writes the machine's sysfs tree and NVML profile under ``workdir`` and builds the library."""
    machine = profile if isinstance(profile, Machine) else load_machine(profile_path(profile), overrides)
    workdir.mkdir(parents=True, exist_ok=True)
    root = write_sysfs(machine, workdir / "root")
    nvml_profile = workdir / "nvml-profile.txt"
    nvml_profile.write_text("\n".join(nvml_lines(machine)) + "\n")
    return FakeNode(machine=machine, root=root, nvml_library=build_library(), nvml_profile=nvml_profile,
                    calls_file=workdir / "nvml-calls.txt")


__all__ = [
    "ENV_CALLS",
    "ENV_NVML_LIBRARY",
    "ENV_PROFILE",
    "ENV_SYSFS_ROOT",
    "MACHINES",
    "BuildError",
    "FakeNode",
    "Machine",
    "ProfileError",
    "build_library",
    "gpus_named",
    "load_machine",
    "materialize",
    "nvml_bus_id",
    "nvml_lines",
    "profile_path",
    "read_calls",
    "scaled_doc",
    "write_scaled",
    "write_sysfs",
]
