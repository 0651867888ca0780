"""FsRoot is the only way to /sys and /proc: discovery code never opens, lists or resolves a path itself,
so a fixture root can never mix with the live machine. A source calling ``open`` directly fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.discovery.access import FsRoot

DISCOVERY = Path(__file__).resolve().parents[1] / "agent" / "discovery"
DIRECT_IO = re.compile(
    r"\bopen\(|os\.(listdir|scandir|readlink|stat|lstat|walk)\(|os\.path\.(realpath|exists|isdir|isfile)\("
    r"|\.read_text\(|\.iterdir\(|\.glob\("
)
# FsRoot itself. (Files a user names, the agent's state directory and its own child processes in the live
# /proc are read outside discovery: none of them is a discovery read.)
ALLOWED = {"_fsroot.py"}


def discovery_modules() -> list[Path]:
    return sorted(p for p in DISCOVERY.rglob("*.py") if p.name not in ALLOWED)


def test_every_module_of_discovery_is_checked() -> None:
    names = {p.name for p in discovery_modules()}
    assert {"_discover.py", "_snapshot.py", "_nvml_port.py", "pci.py", "numa.py", "_sysfs.py"} <= names


@pytest.mark.parametrize("module", discovery_modules(), ids=lambda p: str(p.relative_to(DISCOVERY)))
def test_discovery_reads_only_through_fsroot(module: Path) -> None:
    offending = [f"{module.name}:{n}: {line.strip()}" for n, line in enumerate(module.read_text().splitlines(), 1)
                 if DIRECT_IO.search(line) and not line.lstrip().startswith("#")]
    assert offending == []


def test_fsroot_keeps_absolute_paths_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "sys/class/net/eth0").mkdir(parents=True)
    (tmp_path / "sys/class/net/eth0/mtu").write_text("1500\n")
    (tmp_path / "sys/class/net/lo").symlink_to("/sys/class/net/eth0")  # an absolute link in a gathered tree
    root = FsRoot(tmp_path)
    assert root.path("/sys/class/net") == tmp_path / "sys/class/net"
    assert root.attr("/sys/class/net/eth0/mtu") == "1500"
    assert root.attr("/sys/class/net/eth0/absent") is None
    assert root.listdir("/sys/class/net") == ["eth0", "lo"]
    assert root.listdir("/nowhere") == []
    assert not root.is_live and FsRoot().is_live
