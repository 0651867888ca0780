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

from agent.cli import _common
from agent.cli import serve as cli_serve
from agent.serve import Agent, ServeConfig
from tests.kube_support import PROFILES, discover_profile, validate

NODES = ("", "v1", "nodes")
SLICES = ("resource.k8s.io", "v1", "resourceslices")


def serve_args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="topolink")
    sub = parser.add_subparsers(dest="command")
    cli_serve.add_parsers(sub, _common.add_discovery_args, environ={})
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


@pytest.mark.slow
@pytest.mark.asyncio
async def test_slices_kubelet_deletes_are_back_within_seconds_not_an_interval(
        kmock: Any, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture) -> None:
    """The agent's own threads (discovery loop, the slice sink's watch) with an hour between passes: a slice
    deleted through the API comes back because the watch woke the discovery loop."""
    import threading

    import httpx

    from agent.serve._run import Wake, discovery_loop, watch_loop
    from exporter import WatchingSink
    from tests.kmock_support import poke_watchers

    snap = discover_profile("hgx-h100", tmp_path_factory.mktemp("hgx"))
    kmock.objects[NODES, None, snap.node] = {"apiVersion": "v1", "kind": "Node",
                                             "metadata": {"name": snap.node, "uid": "uid-1", "labels": {}}}
    kmock.resources[SLICES] = {"kind": "ResourceSlice", "namespaced": False,
                               "verbs": ["get", "list", "watch", "create", "update", "delete", "patch"]}
    args = serve_args("--node-name", snap.node, "--kubeconfig", str(kubeconfig(tmp_path, str(kmock.url).rstrip("/"))),
                      "--device-taints", "off", "--labels-via", "none")
    sinks = await asyncio.to_thread(cli_serve.build_sinks, args, {})
    (slices,) = sinks
    assert isinstance(slices, WatchingSink)
    agent = Agent(ServeConfig(state_dir=tmp_path / "state", probe_interval_s=0, discovery_interval_s=3600),
                  lambda: snap, dict, sinks, log=logging.getLogger("test.agent"))
    wake = Wake()
    caplog.set_level(logging.INFO, logger="test.agent")
    threads = [threading.Thread(target=discovery_loop, args=(agent, wake), daemon=True),
               threading.Thread(target=watch_loop, args=(agent, slices, wake), daemon=True)]
    for t in threads:
        t.start()

    async def names() -> list[str]:
        async with httpx.AsyncClient(base_url=str(kmock.url)) as http:
            items = (await http.get("/apis/resource.k8s.io/v1/resourceslices")).json()["items"]
        return sorted(o["metadata"]["name"] for o in items)

    async def until(check: Any, what: str) -> None:
        for _ in range(200):
            if await check():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    async def watching() -> bool:  # the watch's request reached the server (it resumes from the list's version)
        return any(r.method.value.upper() == "GET" and r.params.get("watch") in ("true", "1") for r in list(kmock))

    try:
        await until(names, "the first pass to create the slices")
        (name,) = await names()
        await until(watching, "the watch to open")
        async with httpx.AsyncClient(base_url=str(kmock.url)) as http:
            assert (await http.delete(f"/apis/resource.k8s.io/v1/resourceslices/{name}")).status_code == 200

        async def back() -> bool:
            return await names() == [name]
        await until(back, "the slice to be created again")
        whys = [r.fields["why"] for r in caplog.records if r.getMessage() == "discovery pass"]  # type: ignore[attr-defined]
        assert whys == ["start"]  # a slice changed on the server is no reason to read the hardware again
        resyncs = [r.fields for r in caplog.records if r.getMessage() == "resync"]  # type: ignore[attr-defined]
        deleted, ours = ({"sinks": "resource-slices", "why": f"resourceslice {name} {what}"}
                         for what in ("deleted", "added"))
        # the watch's; the event of our own create, when it came before the create's reply, queued a sync too, and a
        # delete that arrives while that sync waits joins it (the queue coalesces)
        assert resyncs in ([deleted], [ours, deleted], [ours]), resyncs
    finally:
        agent.stopping.set()
        wake("stop")
        await poke_watchers(kmock, snap.node)
        for t in threads:
            await asyncio.to_thread(t.join, 10)
            assert not t.is_alive()
