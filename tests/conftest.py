"""Shared fixtures: the reference data beside the repository, unpacked once per session."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakenvml.fixtures import fake_machine  # noqa: F401  (a fixture: machine profiles made real)

SHARED = Path(os.environ.get("TOPOLINK_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
HWLOC_LINUX = SHARED / "reference" / "hwloc" / "linux"


@pytest.fixture(scope="session")
def hwloc_tree(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``hwloc_tree("x.tar.bz2")``: the gathered tree's root (the one directory holding sys/ and proc/)."""
    unpacked: dict[str, Path] = {}

    def unpack(tarball: str) -> Path:
        if tarball not in unpacked:
            dest = tmp_path_factory.mktemp(tarball.removesuffix(".tar.bz2"))
            with tarfile.open(HWLOC_LINUX / tarball) as tar:
                tar.extractall(dest, filter="tar")  # keeps sysfs's relative symlinks
            (root,) = [p for p in dest.iterdir() if p.is_dir()]
            unpacked[tarball] = root
        return unpacked[tarball]

    return unpack
