"""Base trees for the fuzz suite: the real hwloc trees and machine profiles, unpacked once, copied per case.

A case works on a hard-linked copy of its base tree (``cp -al``: cheap for 10 000 files). Mutators never
write through a shared inode: they unlink first, then create (see ``_mutate.replace_file``).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HWLOC_TREES = (
    "2pa-pcidomain32bits",
    "32em64t-2n8c+dax+nvme+mic+dimms",
    "32intel64-2p8co2t+8ve",
    "40intel64-2g2n4c+pcilocality",
    "nvidiagpunumanodes",
)
PROFILES = ("hgx-h100", "dgx-a100", "gb200-tray", "rtx4090-8x", "dgx1-v100-vm")


@dataclass(frozen=True)
class BaseTree:
    """One pristine tree. ``nvml_library``/``nvml_profile`` are set for machine profiles only."""

    name: str
    root: Path  # the directory holding sys/ and proc/
    profile: str | None = None
    nvml_library: Path | None = None
    nvml_profile: Path | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def make_world_readable(top: Path) -> None:
    """Directories o+rx, files o+r: the unprivileged user sees what root sees, except where a mutation says."""
    for dirpath, _dirnames, filenames in os.walk(top):
        os.chmod(dirpath, os.stat(dirpath).st_mode | 0o755)
        for name in filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                os.chmod(p, st.st_mode | 0o444)


def hwloc_base(name: str, unpacked: Path, dest: Path) -> BaseTree:
    """A world-readable hard-linked copy of an unpacked hwloc tree (the session's ``hwloc_tree``)."""
    root = copy_tree(unpacked, dest / unpacked.name)
    make_world_readable(dest)
    return BaseTree(name=name, root=root)


def restore(work: Path, pristine: Path, rels: list[str]) -> None:
    """Puts ``rels`` of a work tree back as they are in the pristine tree (hard links, links, directories)."""
    for rel in rels:
        w, p = work / rel, pristine / rel
        if os.path.lexists(w):
            if os.path.isdir(w) and not os.path.islink(w):
                remove_tree(w)
            else:
                os.chmod(w.parent, os.stat(w.parent).st_mode | 0o700)
                w.unlink()
        if os.path.islink(p):
            os.symlink(os.readlink(p), w)
        elif os.path.isdir(p):
            subprocess.run(["cp", "-a", "-l", str(p), str(w)], check=True)
        elif os.path.lexists(p):
            os.link(p, w)


def materialize_profile(name: str, dest: Path) -> BaseTree:
    from tests.fakenvml import materialize

    node = materialize(name, dest)
    make_world_readable(dest)
    return BaseTree(name=name, root=node.root, profile=name, nvml_library=node.nvml_library,
                    nvml_profile=node.nvml_profile)


def copy_tree(src: Path, dest: Path) -> Path:
    """A hard-linked copy of ``src`` at ``dest`` (symlinks kept as links)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", "-l", str(src), str(dest)], check=True)
    return dest


def remove_tree(top: Path) -> None:
    """rmtree that first gives back the permissions a mutation took away."""
    if not os.path.lexists(top):
        return
    os.chmod(top, 0o755)
    for dirpath, dirnames, _ in os.walk(top):  # top-down: a directory is opened after its chmod
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                os.chmod(p, 0o755)
    shutil.rmtree(top)


def cleanup_stale(prefix: str = "topolink-fuzz-") -> None:
    """Work directories of runs that were killed (older than a day) would fill /tmp: remove them."""
    import time

    tmp = Path(tempfile.gettempdir())
    for p in tmp.glob(prefix + "*"):
        if time.time() - p.stat().st_mtime > 86400:
            shutil.rmtree(p, ignore_errors=True)
