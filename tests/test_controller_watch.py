"""The fleet controller reads its own objects through informers: one list of each of its kinds when it starts
leading, then watches only, and its writes stand over a lagging watch (the agent's mutation cache), on the
in-memory API server of ``tests/controller_memory.py`` (requests counted)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exporter.kube._api._api import slice_kind
from exporter.kube._controller._controller import NODES, Controller, ControllerConfig
from exporter.kube._fleet._wanted import KINDS
from tests.controller_memory import FLEET, WatchedApi

OWN = {f"{k.plural}.{k.group}" for k in KINDS.values()}
SLURM = ("configmaps.", "default", "topolink-slurm-topology")


def _wait(what: str, ok: Callable[[], Any], said: list[str], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"{what}: {said}"
        time.sleep(0.02)


@pytest.fixture
def running() -> Iterator[tuple[WatchedApi, Controller, list[str]]]:
    api, said = WatchedApi(), list[str]()
    api.seed_fleet()
    cfg = ControllerConfig(delay_s=0.02, resync_s=0.2, explain=False)
    ctl = Controller(api, cfg, said.append)  # type: ignore[arg-type]
    lost = threading.Event()
    worker = threading.Thread(target=ctl.lead, args=(lost,), daemon=True)
    worker.start()
    try:
        _wait("the first sync", lambda: SLURM in api.objects and ctl.syncs >= 1, said)
        yield api, ctl, said
    finally:
        lost.set()
        worker.join(timeout=5)


def _own_lists(api: WatchedApi) -> int:
    return sum(n for (verb, res), n in api.requests.items() if verb == "list" and res in OWN)


def _node(api: WatchedApi, name: str, like: str | None = None) -> None:
    """Node ``name`` with the labels and slices of ``like``; with none, the node and its slices go."""
    items = json.loads(FLEET.read_text())["items"]
    for obj in [o for (res, _, _), o in api.objects.items() if res == "resourceslices.resource.k8s.io"]:
        if obj["spec"]["nodeName"] == name:
            api.remove(slice_kind("v1"), obj["metadata"]["name"])
    if like is None:
        api.remove(NODES, name)
        return
    src = next(o for o in items if o["kind"] == "Node" and o["metadata"]["name"] == like)
    labels = src["metadata"]["labels"] | {"kubernetes.io/hostname": name}
    api.put(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}, "agent")
    for made in (o for o in items if o["kind"] == "ResourceSlice" and o["spec"]["nodeName"] == like):
        api.put(slice_kind("v1"), made | {"metadata": {"name": f"{name}-{made['metadata']['name']}"},
                                          "spec": made["spec"] | {"nodeName": name}}, "agent")


def test_after_start_syncs_and_a_class_change_list_none_of_its_own_kinds(
        running: tuple[WatchedApi, Controller, list[str]]) -> None:
    api, ctl, said = running
    assert ctl.owned is not None
    started = _own_lists(api)
    assert started == ctl.owned.lists == 6  # one list a kind it keeps (KAI's not served here): 6
    writes, syncs = len(api.writes), ctl.syncs
    _wait("five steady-state syncs", lambda: ctl.syncs >= syncs + 5, said)
    assert len(api.writes) == writes  # nothing new: nothing written
    gets = sum(n for (verb, res), n in api.requests.items() if verb == "get" and res in OWN)
    _node(api, "hgx-1", like="tray-00")  # a class change: hgx-1 joins the trays' NVLink domain
    _wait("hgx-1 in Slurm's topology", lambda: "hgx-1" in api.objects[SLURM]["data"]["topology.yaml"], said)
    syncs = ctl.syncs
    _wait("two more syncs", lambda: ctl.syncs >= syncs + 2, said)
    assert _own_lists(api) == started, api.requests
    assert api.requests["list", "nodes."] == 1 and api.requests["list", "resourceslices.resource.k8s.io"] == 1
    # what it wrote is in its stores: no object of its own is read again by name
    assert sum(n for (verb, res), n in api.requests.items() if verb == "get" and res in OWN) == gets


def test_a_write_is_not_made_again_while_its_watch_event_lags(
        running: tuple[WatchedApi, Controller, list[str]]) -> None:
    api, ctl, said = running
    templates = "resourceclaimtemplates.resource.k8s.io"
    h100 = {name for res, _, name in api.objects if res == templates and name.endswith(
        json.loads(FLEET.read_text())["items"][9]["metadata"]["labels"]["gpu.topology/claim-class"])}
    assert h100
    api.held |= OWN  # the controller's watches of its own kinds hear nothing from now on
    before = len(api.writes)
    _node(api, "hgx-0")  # the H100 class's last two nodes go (its templates deleted), one of them as a tray (the
    _node(api, "hgx-1", like="tray-00")  # Slurm topology and the trays' objects rewritten)
    _wait("the H100 templates deleted", lambda: not any(k[0] == templates and k[2] in h100 for k in api.objects),
          said)
    syncs = ctl.syncs
    _wait("three more syncs while the watch lags", lambda: ctl.syncs >= syncs + 3, said)
    made = api.writes[before:]
    assert {("delete", templates, name) for name in h100} <= set(made)
    assert ("apply", "configmaps.", SLURM[2]) in made
    assert len(made) == len(set(made)), "\n".join(map(str, made))  # each write once
    api.release()  # the events arrive: nothing more to write
    syncs = ctl.syncs
    _wait("two syncs after the events", lambda: ctl.syncs >= syncs + 2, said)
    assert api.writes[before:] == made


def test_a_kind_served_later_is_listed_once_then_and_written() -> None:
    api, said = WatchedApi(served=frozenset({"deviceclasses", "resourceclaimtemplates", "topologies",
                                             "resourceflavors", "configmaps"})), list[str]()
    api.seed_fleet()
    ctl = Controller(api, ControllerConfig(delay_s=0.02, resync_s=0.2, explain=False), said.append)  # type: ignore[arg-type]
    lost = threading.Event()
    worker = threading.Thread(target=ctl.lead, args=(lost,), daemon=True)
    worker.start()
    hypernodes = "hypernodes.topology.volcano.sh"
    try:
        _wait("the first sync", lambda: SLURM in api.objects and ctl.syncs >= 1, said)
        assert not api.requests["list", hypernodes] and not api.requests["watch", hypernodes]
        assert any(line.startswith("volcano: not written: the server does not serve hypernodes") for line in said)
        api.served |= {"hypernodes"}  # Volcano's CRDs installed
        _wait("the HyperNodes written", lambda: any(k[0] == hypernodes for k in api.objects), said)
        syncs = ctl.syncs
        _wait("two more syncs", lambda: ctl.syncs >= syncs + 2, said)
        assert api.requests["list", hypernodes] == 1 and "volcano: served: kept current" in said
    finally:
        lost.set()
        worker.join(timeout=5)
