"""Pending pods explained, without a server: which class and size a template asks for, the devices allocated
claims hold (matched to bus ids through the GPU and NIC drivers' slices), the free groups counted per node, the
Event's note for each case, its deduplication, and the ``/metrics`` text. The real control plane's tier is
``tests/test_apiserver_pending.py``."""

from __future__ import annotations

from typing import Any

from exporter._core._claim_groups import ClaimGroups, Group, Pair
from exporter.kube import ClaimConfig, Kind
from exporter.kube._controller._events import REPEAT_S, Recorder
from exporter.kube._controller._pending import (
    Ask,
    asked,
    explain,
    exposition,
    free_groups,
    in_use,
    keep_claim,
    keep_device_slice,
    keep_pod,
    metrics,
)
from exporter.kube._desired._claims import ClaimClass

BUSES = [f"0000:{i:02x}:00.0" for i in range(1, 9)]
NICS = ["0000:a1:00.0", "0000:a2:00.0"]
CLS = ClaimClass(id="c1", nodes=("n1", "n2"), groups=ClaimGroups(
    islands=(Group(devices=("g0", "g1", "g2", "g3"), buses=tuple(BUSES[:4])),
             Group(devices=("g4", "g5", "g6", "g7"), buses=tuple(BUSES[4:]))),
    switches=(Group(devices=("g0", "g1"), buses=tuple(BUSES[:2])),),
    pairs=(Pair(gpu="g0", gpu_bus=BUSES[0], nic="m0", nic_bus=NICS[0], path="PIX"),
           Pair(gpu="g4", gpu_bus=BUSES[4], nic="m1", nic_bus=NICS[1], path="PIX")), gpus=8))
CFG = ClaimConfig()


def _slice(node: str, driver: str, buses: list[str], attr: str = "resource.kubernetes.io/pciBusID") -> dict[str, Any]:
    return {"spec": {"nodeName": node, "driver": driver, "pool": {"name": node},
                     "devices": [{"name": f"d{i}", "attributes": {attr: {"string": b.upper()}}}
                                 for i, b in enumerate(buses)]}}


def _claim(node: str, driver: str, *devices: int) -> dict[str, Any]:
    return {"status": {"allocation": {"devices": {"results": [
        {"driver": driver, "pool": node, "device": f"d{i}", "request": "gpus"} for i in devices]}}}}


def _used(*claims: dict[str, Any]) -> dict[str, set[str]]:
    slices = [keep_device_slice(s, CFG) for s in (
        _slice("n1", "gpu.nvidia.com", BUSES), _slice("n2", "gpu.nvidia.com", BUSES),
        _slice("n1", "dra.net", NICS, "dra.net/pciAddress"), _slice("n1", "other.driver", BUSES))]
    return in_use([keep_claim(c) for c in claims], [s for s in slices if s is not None])


def test_a_template_name_says_its_class_kind_and_size_and_others_are_not_ours() -> None:
    assert asked("topolink-nvlink-4-c1") == Ask("nvlink", 4, "c1")
    assert asked("topolink-switch-2-ab12") == Ask("switch", 2, "ab12")
    assert asked("topolink-gpu-nic-c1") == Ask("gpu-nic", 1, "c1")
    assert asked("my-template") is None and asked("topolink-nvlink-x-c1") is None


def test_allocated_devices_are_matched_to_bus_ids_of_their_node_by_every_driver() -> None:
    used = _used(_claim("n1", "gpu.nvidia.com", 0, 5), _claim("n1", "dra.net", 1), _claim("n2", "gpu.nvidia.com", 7),
                 {"status": {}})  # a pending claim holds nothing
    assert used == {"n1": {BUSES[0], BUSES[5], NICS[1]}, "n2": {BUSES[7]}}


def test_free_groups_count_the_templates_groups_with_enough_devices_free() -> None:
    used = _used(_claim("n1", "gpu.nvidia.com", 0, 5), _claim("n2", "gpu.nvidia.com", 0, 1, 2, 3, 4))
    assert free_groups(CLS, "nvlink", 4, used) == {"n1": 0, "n2": 0}
    assert free_groups(CLS, "nvlink", 3, used) == {"n1": 2, "n2": 1}
    assert free_groups(CLS, "nvlink", 2, used) == {"n1": 2, "n2": 1}
    assert free_groups(CLS, "switch", 2, used) == {"n1": 0, "n2": 0}
    assert free_groups(CLS, "gpu-nic", 1, _used(_claim("n1", "dra.net", 1))) == {"n1": 1, "n2": 2}
    assert sorted(metrics([CLS], (2, 4, 8), used)) == [("c1", "gpu-nic", 1, 1), ("c1", "nvlink", 2, 3),
                                                       ("c1", "nvlink", 4, 0), ("c1", "switch", 2, 0)]


def test_the_note_names_the_class_its_nodes_and_those_with_a_free_group() -> None:
    used = _used(_claim("n1", "gpu.nvidia.com", 0, 4))
    kw: dict[str, Any] = {"classes": {"c1": CLS}, "members": {"c1": ["n1", "n2"]}, "used": used, "label": "p/cc"}
    note = explain(Ask("nvlink", 4, "c1"), "topolink-nvlink-4-c1", **kw)
    assert note.endswith("4 GPUs of one NVLink island on a node of claim class c1: 2 nodes of the class, "
                         "1 with a free group of 4")
    gone = explain(Ask("nvlink", 4, "c9"), "topolink-nvlink-4-c9", **kw)
    assert gone.endswith("claim class c9: no node has that class now (no node is labelled p/cc=c9)")
    unread = explain(Ask("nvlink", 4, "c2"), "t", **kw | {"members": {"c2": ["n3"]}})
    assert "1 nodes of the class, whose groups are not known" in unread
    pair = explain(Ask("gpu-nic", 1, "c1"), "topolink-gpu-nic-c1", **kw)
    assert pair.endswith("2 nodes of the class, 1 with a free GPU and NIC pair")


def test_a_pod_is_kept_only_unbound_in_the_templates_namespace_with_a_claim_of_ours() -> None:
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u"},
           "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "topolink-nvlink-2-c1"},
                                       {"name": "other", "resourceClaimTemplateName": "theirs"}]},
           "status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p-gpus-x"}],
                      "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
    assert keep_pod(pod, "default") == {"name": "p", "namespace": "default", "uid": "u", "unschedulable": True,
                                        "claims": [["gpus", "topolink-nvlink-2-c1", "p-gpus-x"]]}
    assert keep_pod(pod, "elsewhere") is None
    assert keep_pod(pod | {"spec": pod["spec"] | {"nodeName": "n1"}}, "default") is None
    assert keep_pod(pod | {"spec": {"resourceClaims": [pod["spec"]["resourceClaims"][1]]}}, "default") is None


class Written:
    def __init__(self, made: set[str] | None = None) -> None:
        self.applied: list[dict[str, Any]] = []
        self.made = made if made is not None else set()

    def create(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        from exporter.kube import Conflict

        if obj["metadata"]["name"] in self.made:
            raise Conflict("create: 409 already exists")
        self.made.add(obj["metadata"]["name"])
        return self.apply(kind, obj)

    def apply(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        assert kind.plural == "events" and kind.group == "events.k8s.io"
        self.applied.append(obj)
        return obj


def test_an_unchanged_note_is_one_event_and_after_the_window_its_series_counts() -> None:
    now = [0.0]
    api = Written()
    rec = Recorder(api, "me", clock=lambda: now[0])  # type: ignore[arg-type]
    pod = {"name": "p", "namespace": "ns", "uid": "u1"}
    assert rec.warn(pod, "R", "one") and not rec.warn(pod, "R", "one")
    now[0] = REPEAT_S + 1
    assert rec.warn(pod, "R", "one")
    first, again = api.applied
    assert again["metadata"] == first["metadata"] and again["series"]["count"] == 2 and "series" not in first
    assert first["regarding"] == {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "ns", "uid": "u1"}
    assert rec.warn(pod, "R", "two") and api.applied[-1]["metadata"]["name"] != first["metadata"]["name"]
    rec.forget([])  # no longer pending: said again if it comes back
    assert rec.warn(pod, "R", "three")


def test_a_new_leader_finds_the_same_note_said_and_writes_nothing_more() -> None:
    old = Written()
    pod = {"name": "p", "namespace": "ns", "uid": "u1"}
    assert Recorder(old, "a").warn(pod, "R", "one")  # type: ignore[arg-type]
    now = [0.0]
    new = Written(made=old.made)
    rec = Recorder(new, "b", clock=lambda: now[0])  # type: ignore[arg-type]
    assert not rec.warn(pod, "R", "one")
    now[0] = REPEAT_S + 1
    assert not rec.warn(pod, "R", "one") and not new.applied


def test_metrics_text_is_prometheus_text_with_escaped_labels() -> None:
    text = exposition([("c\"1", "nvlink", 2, 3)], {"c\"1": ["n1", "n2"]}, leading=True)
    assert 'topolink_controller_free_groups{class="c\\"1",kind="nvlink",gpus="2"} 3\n' in text
    assert 'topolink_controller_class_nodes{class="c\\"1"} 2\n' in text and "topolink_controller_leading 1\n" in text
    assert "topolink_controller_free_groups{" not in exposition([], {}, leading=False)


def test_a_pods_note_names_each_waiting_claim_once_and_fits_an_event() -> None:
    from exporter.kube._controller._pending import NOTE_MAX, pod_note

    assert pod_note([("gpus", "note a")]) == "note a"  # one claim: its note alone
    assert pod_note([("nics", "note b"), ("gpus", "note a"), ("more", "note a")]) == (
        "3 claims wait: claims gpus, more: note a; claim nics: note b")
    many = pod_note([(f"c{i:03d}", f"template t{i} of class x{i}: " + "n" * 80) for i in range(40)])
    assert len(many) <= NOTE_MAX and many.startswith("40 claims wait: claim c000: ")
    said = many.count("; claim ") + 1
    assert many.endswith(f"; and {40 - said} more claims"), many[-60:]
