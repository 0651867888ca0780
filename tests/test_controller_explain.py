"""Every pending pod explained, by the controller on the in-memory API server (``tests/controller_memory.py``): each
unschedulable pod whose claims of our templates wait gets one Event naming each such claim (a class no node has
said so), and a pod bound, or whose claims are allocated, gets none. The real control plane's tier is
``tests/test_apiserver_pending.py``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from exporter.kube._controller._controller import CLAIMS, PODS, Controller, ControllerConfig
from tests.controller_memory import FLEET, WatchedApi

EVENTS = "events.events.k8s.io"
UNSCHEDULABLE = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]


def _class(node: str) -> str:
    found = next(o for o in json.loads(FLEET.read_text())["items"] if o["metadata"]["name"] == node)
    return str(found["metadata"]["labels"]["gpu.topology/claim-class"])


def _pod(api: WatchedApi, name: str, templates: dict[str, str], *, bound: bool = False,
         conditions: list[dict[str, str]] = UNSCHEDULABLE) -> None:
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"resourceClaims": [{"name": e, "resourceClaimTemplateName": t} for e, t in templates.items()]},
        "status": {"conditions": conditions,
                   "resourceClaimStatuses": [{"name": e, "resourceClaimName": f"{name}-{e}"} for e in templates]}}
    if bound:
        pod["spec"]["nodeName"] = "tray-00"
    api.put(PODS, pod, "kubelet")


def _notes(api: WatchedApi) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for (res, _, _), obj in list(api.objects.items()):
        if res == EVENTS:
            out.setdefault(obj["regarding"]["name"], []).append(obj["note"])
    return out


@contextmanager
def _leading(api: WatchedApi, cfg: ControllerConfig, said: list[str]) -> Iterator[Controller]:
    """The controller leading on ``api`` in a thread of its own, after its first sync; it stops at the end."""
    ctl = Controller(api, cfg, said.append)  # type: ignore[arg-type]
    lost = threading.Event()
    worker = threading.Thread(target=ctl.lead, args=(lost,), daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + 20
        while ctl.syncs < 1:
            assert time.monotonic() < deadline, said
            time.sleep(0.02)
        yield ctl
    finally:
        lost.set()
        worker.join(timeout=5)


def test_every_pending_pod_gets_one_event_naming_each_waiting_claim() -> None:
    api, said = WatchedApi(), list[str]()
    api.seed_fleet()
    tray, h100 = _class("tray-00"), _class("hgx-0")
    # the allocated claim is there before the controller lists: its pod must never be seen before its claim (two
    # informers' streams are not ordered with each other; a pod whose claim is not yet allocated is explained)
    api.put(CLAIMS, {"metadata": {"name": "allocated-gpus", "namespace": "default"},
                     "status": {"allocation": {"devices": {"results": []}}}}, "kube-scheduler")
    with _leading(api, ControllerConfig(delay_s=0.02, resync_s=0.2), said) as ctl:
        deadline = time.monotonic() + 20
        # two claims waiting, one of them of a class no node has; a pod of one claim; a pod of two claims of the
        # same template; one whose claim is allocated; one bound; one the scheduler has not tried yet
        _pod(api, "two", {"gpus": f"topolink-nvlink-2-{tray}", "ghost": "topolink-nvlink-2-0000ghost"})
        _pod(api, "one", {"gpus": f"topolink-nvlink-2-{h100}"})
        _pod(api, "same", {"a": f"topolink-nvlink-2-{h100}", "b": f"topolink-nvlink-2-{h100}"})
        _pod(api, "allocated", {"gpus": f"topolink-nvlink-2-{tray}"})
        _pod(api, "bound", {"gpus": f"topolink-nvlink-2-{tray}"}, bound=True)
        _pod(api, "untried", {"gpus": f"topolink-nvlink-2-{tray}"}, conditions=[])
        while set(_notes(api)) != {"two", "one", "same"}:
            assert time.monotonic() < deadline + 20, (sorted(_notes(api)), said)
            time.sleep(0.02)
        syncs = ctl.syncs
        while ctl.syncs < syncs + 3:  # resyncs: the notes unchanged, nothing said again
            time.sleep(0.02)
        notes = _notes(api)
    assert {pod: len(n) for pod, n in notes.items()} == {"two": 1, "one": 1, "same": 1}, notes
    (two,), (one,), (same,) = notes["two"], notes["one"], notes["same"]
    assert two.startswith("2 claims wait: claim ghost: template topolink-nvlink-2-0000ghost asks for 2 GPUs")
    assert "claim class 0000ghost: no node has that class now" in two
    assert f"; claim gpus: template topolink-nvlink-2-{tray} asks for 2 GPUs of one NVLink island on a node of " \
           f"claim class {tray}: " in two and two.endswith("with a free group of 2")
    assert one.startswith(f"template topolink-nvlink-2-{h100} asks") and one.endswith(
        "2 nodes of the class, 2 with a free group of 2")
    assert same.startswith("2 claims wait: claims a, b: template ") and "; " not in same


class _TimedApi(WatchedApi):
    """The in-memory server, each write's time kept (the Events' creates and the sync's applies and deletes)."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def create(self, kind: Any, obj: dict[str, Any]) -> dict[str, Any]:
        self.times.append(time.monotonic())
        return super().create(kind, obj)

    def apply(self, kind: Any, obj: dict[str, Any]) -> dict[str, Any]:
        self.times.append(time.monotonic())
        return super().apply(kind, obj)

    def delete(self, kind: Any, name: str, namespace: str | None = None) -> None:
        self.times.append(time.monotonic())
        super().delete(kind, name, namespace)


def test_a_job_of_many_pending_pods_is_told_within_the_write_limit() -> None:
    """Forty pods of one job pending at once: their Events share the sync's token bucket (one client's limit, as
    kube-controller-manager's), so over any T seconds at most burst + qps T writes go out, and every pod is told."""
    qps, burst, pods = 40.0, 5, 40
    api, said = _TimedApi(), list[str]()
    api.seed_fleet()
    h100 = _class("hgx-0")
    start = time.monotonic()  # before the bucket is made: it holds `burst` tokens then, and gains `qps` a second
    with _leading(api, ControllerConfig(delay_s=0.02, resync_s=0.2, write_qps=qps, write_burst=burst), said):
        deadline = time.monotonic() + 30
        for i in range(pods):
            _pod(api, f"worker-{i}", {"gpus": f"topolink-nvlink-2-{h100}"})
        while len(_notes(api)) < pods:
            assert time.monotonic() < deadline, (len(_notes(api)), said)
            time.sleep(0.02)
    assert len(api.times) > pods  # the first sync's writes, then the Events
    # the n-th write's token was taken before its time was read, so n <= burst + qps (its time - start) however
    # late a loaded machine reads it; without the bucket the forty Events go out together and break it
    for n, at in enumerate(api.times, 1):
        assert n <= burst + qps * (at - start), (n, at - start)
    assert {pod: len(n) for pod, n in _notes(api).items()} == {f"worker-{i}": 1 for i in range(pods)}
