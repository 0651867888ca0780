"""The smoke run of ``benchmarks.controller --apiserver`` on the shared API server, on a small fleet: the fleet
is made, the controller's first sync writes the Slurm ConfigMap, and each label patch is reflected (the bound of
the issue, 10 s, holds with room: the controller's delay is 1 s). The 10,000-node figures are the benchmark's."""

from __future__ import annotations

import uuid

import pytest

from benchmarks._controller_apiserver import run
from tests.apiserver import ApiServer

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]


def test_a_label_patch_is_reflected_within_the_bound(kube_apiserver: ApiServer) -> None:
    with kube_apiserver.admin() as http:
        figures = run(http, kube_apiserver.kubeconfig(), tag=f"bc{uuid.uuid4().hex[:6]}", nodes=80, changes=2,
                      claims=False)
    assert figures.nodes == 80 and len(figures.changes_s) == 2
    assert max(figures.changes_s) < 10.0, figures.table()
    assert "| 80 |" in figures.table()
