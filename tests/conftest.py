"""Shared fixtures: the reference data in tests/data, unpacked once per session, and the real API server of
the ``apiserver`` tier."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.apiserver import SKIP, ApiServer, assets, running
from tests.fakenvml.fixtures import fake_machine  # noqa: F401  (a fixture: machine profiles made real)
from tests.reference_data import HWLOC_LINUX, unpack_hwloc_tree


@pytest.fixture(scope="session")
def hwloc_tree(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``hwloc_tree("x.tar.bz2")``: the gathered tree's root (the one directory holding sys/ and proc/)."""
    unpacked: dict[str, Path] = {}

    def unpack(tarball: str) -> Path:
        if tarball not in unpacked:
            dest = tmp_path_factory.mktemp(tarball.removesuffix(".tar.bz2"))
            unpacked[tarball] = unpack_hwloc_tree(HWLOC_LINUX / tarball, dest)
        return unpacked[tarball]

    return unpack


@pytest.fixture(scope="session")
def kube_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """A real etcd and kube-apiserver for the session (``apiserver`` tier); without envtest's binaries every
    test of the tier is skipped here, with one line that says what to install."""
    found = assets()
    if found is None:
        pytest.skip(SKIP)
    yield from running(found, tmp_path_factory.mktemp("apiserver"))
