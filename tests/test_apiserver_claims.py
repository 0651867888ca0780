"""The claim templates, allocated by the real kube-scheduler: nodes made from machine profiles, each with NVIDIA's
GPU driver's slice, an RDMA NIC driver's slice and topolink's own, labelled as the agent labels them; the
templates computed from the fleet as ``topolink cluster --format claims`` reads it, created on the server, and
pods using them. The ResourceClaims' ``status.allocation`` (what a kubelet plugin reads) must hold each pod's
devices inside one group of the node it runs on.

One fleet for the module: an 8x A6000 node (four NVLink pairs), the same machine with one pair's links down, 8
GPUs under two levels of PCIe switches (pairs under leaf switches, quads under the switch above), and an HGX
H100 (one island of eight, a NIC under each GPU's switch) whose NIC driver's slice is shaped as dranet
publishes it: each NIC's bus id in ``dra.net/pciAddress`` only, and a virtual interface with no PCI address at
all (a selector that read an attribute such a device lacks would abort every allocation on the node).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx
import pytest

from exporter.kube import (
    ClaimConfig,
    ClaimRead,
    SliceConfig,
    build_slices,
    claim_plan,
    desired_devices,
    read_claim_classes,
)
from tests.apiserver import ApiServer
from tests.apiserver_agent import SLICES, wait_until
from tests.gpu_driver import gpu_slice, nic_slice
from tests.placement_support import discover_profile
from tests.published import labels
from tests.ready_nodes import ReadyNodes
from tests.test_claims import TWO_LEVELS
from topology import Snapshot

pytestmark = [pytest.mark.apiserver, pytest.mark.slow]
NS = "/api/v1/namespaces/default"
RESOURCE = "/apis/resource.k8s.io/v1"
CFG = ClaimConfig()
PAIRS = {"version": "3.0", "links": 4, "pairs": [[0, 1, 4], [2, 3, 4], [4, 5, 4], [6, 7, 4]]}
NODES = {"cl-a6000": ("a6000-8x-nvlink-pairs", None),
         "cl-a6000-down": ("a6000-8x-nvlink-pairs", {"nvlink": PAIRS | {"down": {0: [0, 1, 2, 3], 1: [0, 1, 2, 3]}}}),
         "cl-h100": ("hgx-h100", None), "cl-pcie2": TWO_LEVELS}


class HttpPages:
    """The fleet read's port over the admin client: what ``topolink cluster`` asks the server."""

    def __init__(self, http: httpx.Client) -> None:
        self._http = http

    def get_page(self, path: str, params: Mapping[str, str], accept: str | None = None) -> bytes:
        resp = self._http.get(path, params=dict(params), headers={"Accept": accept} if accept else {})
        assert resp.status_code == 200, resp.text
        return resp.content

    def served_versions(self, group: str) -> Sequence[str]:
        return [v["version"] for v in self._http.get(f"/apis/{group}").json()["versions"]]


@pytest.fixture(scope="module")
def fleet(kube_control_plane: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The nodes Ready, their slices and labels published, the objects for groups of 2 created."""
    with kube_control_plane.admin() as http:
        ready = ReadyNodes(http)
        snaps: dict[str, Snapshot] = {}
        for node, (profile, overrides) in NODES.items():
            snap = snaps[node] = discover_profile(profile, tmp_path_factory.mktemp(node), overrides)
            made = ready.add(node, labels(snap))
            devices = desired_devices(snap, SliceConfig(taints=False))
            (ours,) = build_slices(devices, node=node, node_uid=made["metadata"]["uid"], cfg=SliceConfig(taints=False),
                                   version="v1", generation=1)
            nics = dranet_shaped(nic_slice(snap, node)) if node == "cl-h100" else nic_slice(snap, node)
            for obj in (ours, gpu_slice(snap, node), nics):
                resp = http.post(SLICES, json=obj)
                assert resp.status_code == 201, resp.text
        read = read_claim_classes(HttpPages(http))
        plan = claim_plan(read.classes, 2, CFG)
        fours = [o for o in claim_plan(read.classes, 4, CFG).objects
                 if o["metadata"]["name"].startswith(("topolink-nvlink-4-", "topolink-switch-4-"))]
        for obj in (*plan.objects, *fours):
            kind = "deviceclasses" if obj["kind"] == "DeviceClass" else "namespaces/default/resourceclaimtemplates"
            resp = http.post(f"{RESOURCE}/{kind}", json=obj)
            assert resp.status_code == 201, resp.text
        try:
            yield {"http": http, "snaps": snaps, "read": read, "plan": plan}
        finally:
            ready.close()


def dranet_shaped(made: dict[str, Any]) -> dict[str, Any]:
    """``made`` (a NIC slice with the standard attributes) as dranet publishes it: the bus id in its own
    ``dra.net/pciAddress``, and one more device, a virtual interface, with no PCI attribute."""
    for device in made["spec"]["devices"]:
        attrs = device["attributes"]
        attrs["dra.net/pciAddress"] = attrs.pop("resource.kubernetes.io/pciBusID")
    made["spec"]["devices"].append({"name": "veth0", "attributes": {"dra.net/ifName": {"string": "veth0"},
                                                                   "dra.net/virtual": {"bool": True}}})
    return made


def _class_of(read: ClaimRead, node: str) -> str:
    (found,) = [c.id for c in read.classes if node in c.nodes]
    return found


def _pod(http: httpx.Client, name: str, class_id: str, *, template: str | None = None,
         claim: str | None = None) -> None:
    source = {"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"nodeSelector": {CFG.class_label: class_id}, "resourceClaims": [{"name": "gpus", **source}],
                    "containers": [{"name": "c", "image": "example.invalid/none",
                                    "resources": {"claims": [{"name": "gpus"}]}}]}}
    resp = http.post(f"{NS}/pods", json=pod)
    assert resp.status_code == 201, resp.text


def _allocated(http: httpx.Client, pod: str, claim: str | None = None) -> tuple[str, list[str]]:
    """The node the pod was bound to and the bus ids of its devices, from its claim's ``status.allocation``
    (``claim``: the pod's own; else the one made from its template)."""
    def bound() -> Any:
        got = http.get(f"{NS}/pods/{pod}").json()
        return got if got["spec"].get("nodeName") and (claim or got.get("status", {}).get("resourceClaimStatuses")) \
            else None

    got = wait_until(f"pod {pod} scheduled", bound, timeout=60)
    claim = claim or got["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    status = http.get(f"{RESOURCE}/namespaces/default/resourceclaims/{claim}").json()["status"]
    results = status["allocation"]["devices"]["results"]
    return got["spec"]["nodeName"], [_bus(http, r["driver"], r["pool"], r["device"]) for r in results]


def _bus(http: httpx.Client, driver: str, pool: str, device: str) -> str:
    for s in http.get(f"{RESOURCE}/resourceslices", params={"fieldSelector": f"spec.driver={driver}"}).json()["items"]:
        if s["spec"]["pool"]["name"] == pool:
            for d in s["spec"]["devices"]:
                if d["name"] == device:
                    attrs = d["attributes"]
                    return str((attrs.get("resource.kubernetes.io/pciBusID") or attrs["dra.net/pciAddress"])["string"])
    raise AssertionError(f"{driver}/{pool}/{device} is in no slice")


def _unschedulable(http: httpx.Client, pod: str) -> bool:
    conditions = http.get(f"{NS}/pods/{pod}").json().get("status", {}).get("conditions") or []
    return any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
               for c in conditions)


def test_every_class_is_read_and_the_degraded_node_is_a_class_of_its_own(fleet: dict[str, Any]) -> None:
    read: ClaimRead = fleet["read"]
    assert not read.problems
    assert len({_class_of(read, n) for n in NODES}) == 4
    islands = {n: [g.buses for g in next(c for c in read.classes if n in c.nodes).groups.islands] for n in NODES}
    assert len(islands["cl-a6000"]) == 4 and len(islands["cl-a6000-down"]) == 3
    broken = islands["cl-a6000"][0]
    assert broken not in islands["cl-a6000-down"]  # GPU 0's links are down: its pair is offered no more
    template = f"topolink-nvlink-2-{_class_of(read, 'cl-a6000-down')}"
    offered = [o for o in fleet["plan"].objects if o["metadata"]["name"] == template]
    (request,) = offered[0]["spec"]["spec"]["devices"]["requests"]
    expressions = [sub["selectors"][0]["cel"]["expression"] for sub in request["firstAvailable"]]
    assert len(expressions) == 3 and not any(bus in e for e in expressions for bus in broken)


def test_pairs_are_allocated_whole_and_a_pod_stays_pending_rather_than_split(fleet: dict[str, Any]) -> None:
    http, read = fleet["http"], fleet["read"]
    cls = _class_of(read, "cl-a6000")
    islands = [set(g.buses) for g in next(c for c in read.classes if c.id == cls).groups.islands]
    for i, taken in enumerate((sorted(islands[1])[0], sorted(islands[3])[0])):  # one GPU of two pairs, by hand
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": f"one-gpu-{i}"},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": "topolink-gpu", "selectors": [{"cel": {"expression":
                         f'device.attributes["resource.kubernetes.io"].pciBusID == "{taken}"'}}]}}]}}}
        assert http.post(f"{RESOURCE}/namespaces/default/resourceclaims", json=claim).status_code == 201
        _pod(http, f"one-gpu-{i}", cls, claim=f"one-gpu-{i}")
        assert _allocated(http, f"one-gpu-{i}", f"one-gpu-{i}") == ("cl-a6000", [taken])
    template = f"topolink-nvlink-2-{cls}"
    got = []
    for i in range(2):
        _pod(http, f"pair-{i}", cls, template=template)
        node, buses = _allocated(http, f"pair-{i}")
        assert node == "cl-a6000" and set(buses) in islands, buses
        got.append(set(buses))
    assert got == [islands[0], islands[2]]  # best first, the pairs with a GPU taken passed over
    _pod(http, "pair-2", cls, template=template)  # two GPUs are free, one in each of two pairs: no pair is
    wait_until("the third pod unschedulable", lambda: _unschedulable(http, "pair-2"), timeout=60)
    assert not http.get(f"{NS}/pods/pair-2").json()["spec"].get("nodeName")


def test_a_gpu_and_its_nearest_nic_come_together_and_classes_never_cross(fleet: dict[str, Any]) -> None:
    http, read, snaps = fleet["http"], fleet["read"], fleet["snaps"]
    cls = _class_of(read, "cl-h100")
    pairs = {(p.gpu_bus, p.nic_bus) for p in next(c for c in read.classes if c.id == cls).groups.pairs}
    _pod(http, "gpu-nic-0", cls, template=f"topolink-gpu-nic-{cls}")
    node, buses = _allocated(http, "gpu-nic-0")
    gpus = {g.id for g in snaps["cl-h100"].gpus}
    assert node == "cl-h100" and len(buses) == 2
    gpu = next(b for b in buses if b in gpus)
    nic = next(b for b in buses if b not in gpus)
    assert (gpu, nic) in pairs
    _pod(http, "island-h100", cls, template=f"topolink-nvlink-2-{cls}")
    node, buses = _allocated(http, "island-h100")
    assert node == "cl-h100" and set(buses) <= gpus and len(buses) == 2


def test_four_gpus_under_the_upper_switch_of_two_levels_come_together(fleet: dict[str, Any]) -> None:
    """The quad under an upper PCIe switch is offered (the nearest switches hold two GPUs each) and allocated
    whole; a second pod takes the other quad."""
    http, read = fleet["http"], fleet["read"]
    cls = _class_of(read, "cl-pcie2")
    quads = [set(g.buses) for g in next(c for c in read.classes if c.id == cls).groups.switches if len(g.buses) == 4]
    assert len(quads) == 2
    got = []
    for i in range(2):
        _pod(http, f"quad-{i}", cls, template=f"topolink-switch-4-{cls}")
        node, buses = _allocated(http, f"quad-{i}")
        assert node == "cl-pcie2" and set(buses) in quads, buses
        got.append(set(buses))
    assert got[0] != got[1]


def test_the_docs_pod_gets_four_gpus_of_one_island(fleet: dict[str, Any]) -> None:
    from tests.test_claims import doc_manifests

    http, snaps = fleet["http"], fleet["snaps"]
    pod = doc_manifests()["Pod"]
    assert pod["spec"]["nodeSelector"][CFG.class_label] == _class_of(fleet["read"], "cl-h100")
    resp = http.post(f"{NS}/pods", json=pod)
    assert resp.status_code == 201, resp.text
    node, buses = _allocated(http, pod["metadata"]["name"])
    (island,) = [set(g.buses) for g in next(c for c in fleet["read"].classes if "cl-h100" in c.nodes).groups.islands]
    assert node == "cl-h100" and len(set(buses)) == 4 and set(buses) <= island
    assert {g.id for g in snaps["cl-h100"].gpus} >= set(buses)


def test_the_fleet_job_applies_them_server_side_and_a_second_run_changes_nothing(
        kube_control_plane: ApiServer, fleet: dict[str, Any]) -> None:
    import subprocess
    import sys

    http = fleet["http"]
    assert http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": "claims-applied"}}).status_code == 201
    args = [sys.executable, "-m", "agent.cli", "cluster", "--kubeconfig", str(kube_control_plane.kubeconfig()),
            "--format", "claims", "--gpus", "2", "--apply", "--namespace", "claims-applied"]
    listed = f"{RESOURCE}/namespaces/claims-applied/resourceclaimtemplates"
    versions = []
    for _ in range(2):
        run = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
        assert run.returncode == 0, run.stderr
        items = http.get(listed).json()["items"]
        versions.append({i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in items})
        for item in items:
            ours = [m["operation"] for m in item["metadata"]["managedFields"] if m["manager"] == "topolink"]
            assert ours == ["Apply"]
    assert versions[0] == versions[1] and len(versions[0]) == 7  # nvlink-2 and gpu-nic per NVLink class, switch-2
