"""The agent publishes: ``topolink serve``'s own flags build the Kubernetes sinks, and one discovery pass of
the agent writes valid labels and ResourceSlices for every machine profile to an API server (kmock); the
next pass writes nothing. Outside a cluster the same flags publish nothing and say so."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from agent import cli, cli_serve
from agent.serve import Agent, ServeConfig
from tests.kube_support import PROFILES, discover_profile, validate

NODES = ("", "v1", "nodes")
SLICES = ("resource.k8s.io", "v1", "resourceslices")


def serve_args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="topolink")
    sub = parser.add_subparsers(dest="command")
    cli_serve.add_parsers(sub, cli._add_discovery_args, environ={})
    return parser.parse_args(["serve", *extra])


def kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    return path


def writes(kmock: Any) -> list[Any]:
    return [r for r in kmock if r.method.value.lower() in ("post", "put", "patch", "delete")]


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("profile", PROFILES)
async def test_one_pass_publishes_valid_labels_and_slices_then_nothing(
        profile: str, kmock: Any, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    snap = discover_profile(profile, tmp_path_factory.mktemp(profile))
    kmock.objects[NODES, None, snap.node] = {"apiVersion": "v1", "kind": "Node",
                                             "metadata": {"name": snap.node, "uid": "uid-1", "labels": {}}}
    kmock.resources[SLICES] = {"kind": "ResourceSlice", "namespaced": False,
                               "verbs": ["get", "list", "create", "update", "delete", "patch"]}
    args = serve_args("--node-name", snap.node, "--kubeconfig", str(kubeconfig(tmp_path, str(kmock.url).rstrip("/"))),
                      "--device-taints", "off")
    sinks = await asyncio.to_thread(cli_serve.build_sinks, args, {})
    assert [s.name for s in sinks] == ["node-labels", "resource-slices"]
    agent = Agent(ServeConfig(state_dir=tmp_path / "state", probe_interval_s=0), lambda: snap, dict, sinks,
                  log=logging.getLogger("test"))
    await asyncio.to_thread(agent.discover_once, "start")
    first = writes(kmock)
    (apply,) = [w for w in first if "/nodes/" in str(w.url)]
    labels = apply.data["metadata"]["labels"]
    assert labels["gpu.topology/gpu.count"] == str(len(snap.gpus))
    validate(apply.data, "1.37")
    created = [w.data for w in first if "resourceslices" in str(w.url) and w.method.value.lower() == "post"]
    assert created and all(s["spec"]["nodeName"] == snap.node for s in created)
    for body in created:
        validate(body, "1.37")
    await asyncio.to_thread(agent.discover_once, "interval")
    assert writes(kmock) == first  # steady state: reads only


def test_outside_a_cluster_nothing_is_published(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_serve.build_sinks(serve_args("--node-name", "n1"), {}) == []
    assert "labels and ResourceSlices are not published" in capsys.readouterr().err


def test_a_features_file_needs_no_cluster(tmp_path: Path) -> None:
    target = tmp_path / "topolink"
    sinks = cli_serve.build_sinks(serve_args("--node-name", "n1", "--labels-via", "file", "--features-file",
                                             str(target)), {})
    assert [s.name for s in sinks] == ["feature-file"]
