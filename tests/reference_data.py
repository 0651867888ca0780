"""The reference data from real machines that the tests and benchmarks read, all inside the repository.

``tests/data/README.md`` lists each file with where it came from and its licence. Nothing here looks
outside the repository: a fresh clone has everything it needs.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
TOPO = DATA / "topo"  # real `nvidia-smi topo -m` outputs
NVLINK = DATA / "nvlink"  # real `nvidia-smi nvlink` outputs
HWLOC_LINUX = DATA / "hwloc" / "linux"  # hwloc's gathered sysfs trees with hwloc's expected output
# Gathered trees in which two readings contradict each other, and the source the cross-check says failed:
# 32intel64-2p8co2t+8ve has InfiniBand HCAs bound to mlx5_core but no /sys/class/infiniband (hwloc shows no
# OpenFabrics device for them either), so whether they did RDMA cannot be told from the tree.
DISPUTED = {"32intel64-2p8co2t+8ve": "infiniband"}


def hwloc_tarballs() -> list[Path]:
    return sorted(HWLOC_LINUX.glob("*.tar.bz2"))


def _without_owner(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's ``tar`` filter (sysfs's relative symlinks kept, setuid and group/other write bits cleared), and
    the files left to whoever unpacks them: as root, tarfile would otherwise look up the gatherer's user and
    group by name and change the owner of each of thousands of files, a quarter to two thirds of the unpacking's
    time (measured, a loaded 2-core machine), for an owner (the gatherer's uid 1000) that no test reads. A user
    other than root gets the same tree either way."""
    return tarfile.tar_filter(member, dest).replace(uid=None, gid=None, uname=None, gname=None, deep=False)


def unpack_hwloc_tree(tarball: Path, dest: Path) -> Path:
    """Unpacks one gathered tree into the empty directory ``dest``; returns the directory holding sys/ and proc/."""
    with tarfile.open(tarball) as tar:
        tar.extractall(dest, filter=_without_owner)
    (root,) = [p for p in dest.iterdir() if p.is_dir()]
    return root
