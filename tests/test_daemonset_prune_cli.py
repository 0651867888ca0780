"""``topolink prune`` (agent/cli/prune.py), the command the prune overlay's Job runs."""

from __future__ import annotations

from typing import Any

import pytest

import agent.cli
from exporter.kube import PruneResult, PublishError


@pytest.fixture
def cli() -> Any:
    return agent.cli


def test_prune_whole_cluster_when_asked(cli: Any, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[Any] = []
    monkeypatch.setenv("NODE_NAME", "from-the-shell")
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.setattr("exporter.kube.prune", lambda cfg, node, controller_namespace: seen.append(
        (cfg, node, controller_namespace)) or PruneResult(labels=3, slices=2))
    assert cli.main(["prune", "--all-nodes", "--dra-driver-name", "gpu.example", "--labels-via", "nodefeature"]) == 0
    ((cfg, node, namespace),) = seen
    assert node is None and cfg.driver == "gpu.example" and cfg.labels_via == "nodefeature"
    assert namespace == "topolink"  # the fleet controller's Slurm ConfigMap: its default namespace
    assert "every node: labels cleared on 3 node(s)" in capsys.readouterr().out
    monkeypatch.setenv("POD_NAMESPACE", "from-the-job")  # the Job's own namespace, as the controller's default
    assert cli.main(["prune", "--all-nodes"]) == 0 and seen[-1][2] == "from-the-job"
    assert cli.main(["prune", "--all-nodes", "--controller-namespace", "elsewhere"]) == 0 and seen[-1][2] == "elsewhere"


def test_prune_names_its_nodes_or_prunes_nothing(cli: Any, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Neither --node-name nor --all-nodes is a usage error before any request, whatever $NODE_NAME says; both
    at once too. The help says so and claims no $NODE_NAME default."""
    seen: list[Any] = []
    monkeypatch.setenv("NODE_NAME", "from-the-shell")
    monkeypatch.setattr("exporter.kube.prune", lambda cfg, node, **_: seen.append(node) or PruneResult())
    assert cli.main(["prune"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--node-name NODE" in err and "--all-nodes" in err
    assert cli.main(["prune", "--node-name", "gpu-1", "--all-nodes"]) == 2
    assert "not allowed with" in capsys.readouterr().err
    assert cli.main(["prune", "--node-name", ""]) == 2  # "$NODE" unset in a shell
    assert "--node-name: '': empty" in capsys.readouterr().err
    assert seen == []
    with pytest.raises(SystemExit):
        cli.main(["prune", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: $NODE_NAME" not in text and "$NODE_NAME is never read" in text and "--all-nodes" in text


def test_prune_one_node_and_failures(cli: Any, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(cfg: Any, node: str | None, **_: Any) -> PruneResult:
        assert node == "gpu-1"
        raise PublishError("list nodes: 403 forbidden")

    monkeypatch.setattr("exporter.kube.prune", refuse)
    assert cli.main(["prune", "--node-name", "gpu-1"]) == 1
    assert "403 forbidden" in capsys.readouterr().err
    assert cli.main(["prune", "--label-prefix"]) == 2
    assert cli.main(["prune", "--label-prefix", "Not A Prefix"]) == 2
