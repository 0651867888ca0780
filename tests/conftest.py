"""Shared fixtures: the reference data in tests/data, unpacked once per session, and the real API server of
the ``apiserver`` tier."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import apiserver
from tests.apiserver import CONTROL_PLANE_SKIP, SKIP, ApiServer, assets, running
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


@pytest.fixture(scope="session")
def kube_control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """A second real API server with kube-scheduler and kube-controller-manager beside it (every default
    controller: garbage collector, DaemonSet, node lifecycle, ResourceClaim...), for tests that need what a
    cluster's controllers do; Nodes become schedulable through :class:`tests.ready_nodes.ReadyNodes`."""
    if assets() is None:
        pytest.skip(SKIP)
    found = assets(("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"))
    if found is None:
        pytest.skip(CONTROL_PLANE_SKIP)
    yield from running(found, tmp_path_factory.mktemp("control-plane"), control_plane=True)


_SKIP_LINE = next(n for n, line in enumerate(Path(apiserver.__file__).read_text().splitlines(), 1)
                  if line.startswith("SKIP = "))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Every test of the tier skipped for want of the binaries reports one place (where the reason is
    written), so that ``-ra`` folds them into one line."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and isinstance(report.longrepr, tuple) and SKIP in str(report.longrepr[2]):
        report.longrepr = (apiserver.__file__, _SKIP_LINE, report.longrepr[2])
