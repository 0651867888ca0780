"""What schedulers read of the placement model: the ``allreduce-busbw-N`` node labels (classes, hysteresis,
only sizes a node can host, never a guess), the ``pcieSwitch`` and ``nvlinkIsland`` device attributes, and
the operator guide's worked ResourceClaim (validated against the Kubernetes schemas, its DeviceClass selector
evaluated in CEL against our devices, its constraint met where an expert says it can be)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
import yaml

import topology as t
from exporter.kube import LabelConfig, SliceConfig, build_slices, desired_devices, desired_labels
from exporter.kube._desired._busbw import SIZES, best_busbw, busbw_class
from exporter.kube._desired._slices import ATTRIBUTES
from tests.docs_support import marked
from tests.kube_support import K8S, PROFILES, discover_profile, validate
from topology import replace

P = "gpu.topology"
GB = 1e9


@pytest.fixture(scope="module")
def snaps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, t.Snapshot]:
    return {p: discover_profile(p, tmp_path_factory.mktemp(p)) for p in PROFILES}


def unknown(snap: t.Snapshot, gpu: int, aspect: t.Aspect) -> t.Snapshot:
    """The snapshot with one fact of one GPU unknown (a problem that says so)."""
    fact = t.Fact(subject=snap.gpus[gpu].id, aspect=aspect)
    problem = t.Problem(source="nvml", subject=fact.subject, message="unreadable", unknown=(fact,))
    return replace(snap, problems=(*snap.problems, problem))


def busbw_keys(labels: dict[str, str]) -> dict[int, str]:
    return {int(k.rsplit("-", 1)[1]): v for k, v in labels.items() if k.startswith(f"{P}/allreduce-busbw-")}


# (profile, the classes an expert expects, why)
EXPECTED = [
    ("hgx-h100", {2: "256", 4: "256", 8: "256"}, "NV18 through NVSwitches: 359, 358 and 417 GB/s (NVLS for 8)"),
    ("a6000-8x-nvlink-pairs", {2: "64", 4: "16", 8: "8"},
     "a bridged pair 80 GB/s; four GPUs cross PCIe Gen4 (25 GB/s); eight cross the SMP link"),
    ("a30-4x-nvlink-pairs", {2: "64", 4: "8"},
     "a bridged pair; all 4 span two sockets and cross the SMP link (16 GB/s, a stated default); no label for 8"),
    ("gh200", {}, "one GPU: no group to label"),
]


@pytest.mark.parametrize(("profile", "want", "why"), EXPECTED, ids=[e[0] for e in EXPECTED])
def test_busbw_labels_are_the_best_groups_estimates_in_classes(snaps: dict[str, t.Snapshot], profile: str,
                                                               want: dict[int, str], why: str) -> None:
    snap = snaps[profile]
    labels = desired_labels(snap, LabelConfig(), {})
    assert busbw_keys(labels) == want, why
    for n, value in best_busbw(snap).items():  # the class is the figure's power-of-two floor in GB/s
        assert value is not None and int(want[n]) <= value / GB < 2 * int(want[n])
        assert value == t.best_groups(snap, n, top=1).groups[0].estimate.busbw_bytes_per_second


def test_every_profile_labels_only_the_sizes_it_can_host(snaps: dict[str, t.Snapshot]) -> None:
    for profile, snap in snaps.items():
        usable = len([g for g in snap.gpus if not g.lost and not g.mig_enabled])
        labels = busbw_keys(desired_labels(snap, LabelConfig(), {}))
        assert set(labels) == {n for n in SIZES if n <= usable}, profile
        assert all(v.isdigit() and (int(v) & (int(v) - 1)) == 0 for v in labels.values()), profile


@pytest.mark.parametrize(("gbs", "previous", "want"), [
    (417, None, "256"), (0.5, None, "0"), (1.0, None, "1"), (1023.9, None, "512"),
    (250, "256", "256"),  # under the edge by 2%: stays
    (231, "256", "256"), (230, "256", "128"),  # the edge less 10% is where it drops
    (560, "256", "256"), (564, "256", "512"),  # the next edge (512) plus 10% is where it rises
    (300, "512", "256"), (2100, "512", "1024"),  # far moves: as far as the margin allows (2048 needs 2253)
    (300, "300", "256"), (300, "big", "256"),  # a value we never write is no previous class
])
def test_classes_move_with_hysteresis(gbs: float, previous: str | None, want: str) -> None:
    assert busbw_class(gbs * GB, previous) == want


def test_an_unknown_fact_keeps_the_labels_and_never_guesses(snaps: dict[str, t.Snapshot]) -> None:
    snap = snaps["hgx-h100"]
    old = {f"{P}/allreduce-busbw-2": "512", f"{P}/allreduce-busbw-4": "512", f"{P}/allreduce-busbw-8": "512"}
    lost = unknown(replace(snap, gpus=(replace(snap.gpus[0], lost=True), *snap.gpus[1:])),
                   0, t.Aspect.ALL)
    assert busbw_keys(desired_labels(lost, LabelConfig(), old)) == {2: "512", 4: "512", 8: "512"}
    assert busbw_keys(desired_labels(lost, LabelConfig(), {})) == {}  # nothing known before: nothing written
    nvlinks = unknown(snap, 3, t.Aspect.NVLINKS)
    assert busbw_keys(desired_labels(nvlinks, LabelConfig(), old)) == {2: "512", 4: "512", 8: "512"}
    assert busbw_keys(desired_labels(snap, LabelConfig(), old)) == {2: "256", 4: "256", 8: "256"}


def test_mig_gpus_are_no_group(snaps: dict[str, t.Snapshot]) -> None:
    snap = snaps["hgx-h100"]
    mig = replace(snap, gpus=tuple(replace(g, mig_enabled=g.index not in (0, 1, 2))
                                               for g in snap.gpus))
    assert set(busbw_keys(desired_labels(mig, LabelConfig(), {}))) == {2}


def _gpu_devices(snap: t.Snapshot) -> dict[str, dict[str, Any]]:
    return {d["name"]: d["attributes"] for d in desired_devices(snap, SliceConfig()) if d["name"].startswith("gpu-")}


def test_each_gpu_names_its_pcie_switch_and_nvlink_island(snaps: dict[str, t.Snapshot]) -> None:
    hgx = _gpu_devices(snaps["hgx-h100"])
    switches = {d[f"{P}/pcieSwitch"]["string"] for d in hgx.values()}
    assert len(switches) == 8 and all(re.fullmatch(r"0000:[0-9a-f]{2}:00\.0", s) for s in switches)
    assert {d[f"{P}/nvlinkIsland"]["int"] for d in hgx.values()} == {0}
    pairs = _gpu_devices(snaps["a6000-8x-nvlink-pairs"])  # every GPU on a root port: the root complex stands in
    assert all(d[f"{P}/pcieSwitch"] == d["resource.kubernetes.io/pcieRoot"] for d in pairs.values())
    assert sorted(Counter(d[f"{P}/nvlinkIsland"]["int"] for d in pairs.values()).values()) == [2, 2, 2, 2]
    nics = [d for d in desired_devices(snaps["hgx-h100"], SliceConfig()) if d["name"].startswith("nic-")]
    assert nics and all(f"{P}/pcieSwitch" in d["attributes"] for d in nics)
    assert {d["attributes"][f"{P}/pcieSwitch"]["string"] for d in nics} <= switches  # NICs under GPU switches


def test_an_unknown_pcie_path_keeps_the_switch_attribute(snaps: dict[str, t.Snapshot]) -> None:
    snap = snaps["hgx-h100"]
    before = desired_devices(snap, SliceConfig())
    gpu0 = next(d for d in before if d["name"] == f"gpu-{snap.gpus[0].minor}")
    moved = {**gpu0, "attributes": {**gpu0["attributes"], f"{P}/pcieSwitch": {"string": "0000:77:00.0"}}}
    after = {d["name"]: d for d in desired_devices(unknown(snap, 0, t.Aspect.PCIE_PATH), SliceConfig(), [moved])}
    assert after[gpu0["name"]]["attributes"][f"{P}/pcieSwitch"] == {"string": "0000:77:00.0"}


def test_the_attributes_still_fit_the_api_limit() -> None:
    nic_only = {"name", "linkLayer", "rateGbps"}
    gpu_attributes = [a for a, _, _ in ATTRIBUTES if a not in nic_only]
    assert len(gpu_attributes) <= 32  # attributes + capacities per device (resource.k8s.io/v1)
    assert all(len(a.rpartition("/")[2]) <= 32 for a, _, _ in ATTRIBUTES)


def claim_objects() -> list[dict[str, Any]]:
    _, text = marked("nvlink-claim")
    body = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    return [d for d in yaml.safe_load_all(body) if d]


def test_the_readme_claim_validates_against_every_schema() -> None:
    objs = claim_objects()
    assert [o["kind"] for o in objs] == ["DeviceClass", "ResourceClaim"]
    for k8s in K8S:
        for obj in objs:
            validate(obj, k8s)
    claim = objs[1]["spec"]["devices"]
    published = {a if "/" in a else f"{P}/{a}" for a, _, _ in ATTRIBUTES}
    assert {c["matchAttribute"] for c in claim["constraints"]} <= published
    assert claim["requests"][0]["exactly"]["tolerations"][0]["key"] == f"{P}/topology-only"


def _allocatable(devices: list[dict[str, Any]], count: int, attribute: str) -> bool:
    """As the allocator's matchAttribute: ``count`` devices with the attribute and one equal value."""
    values = Counter(str(d["attributes"][attribute]) for d in devices if attribute in d["attributes"])
    return any(n >= count for n in values.values())


def test_the_claim_selects_our_gpus_and_fits_where_an_expert_says(snaps: dict[str, t.Snapshot]) -> None:
    cel = pytest.importorskip("cel")
    device_class, claim = claim_objects()
    expression = device_class["spec"]["selectors"][0]["cel"]["expression"]
    request = claim["spec"]["devices"]["requests"][0]["exactly"]
    attribute = claim["spec"]["devices"]["constraints"][0]["matchAttribute"]

    def chosen(snap: t.Snapshot) -> list[dict[str, Any]]:
        out = []
        for d in desired_devices(snap, SliceConfig()):
            by_domain: dict[str, dict[str, Any]] = {}
            for name, value in d["attributes"].items():
                domain, _, ident = name.rpartition("/")
                by_domain.setdefault(domain, {})[ident] = next(iter(value.values()))
            if cel.evaluate(expression, {"device": {"driver": P, "attributes": by_domain}}) is True:
                out.append(d)
        return out

    hgx, pairs = chosen(snaps["hgx-h100"]), chosen(snaps["a6000-8x-nvlink-pairs"])
    assert len(hgx) == 8 and all(d["name"].startswith("gpu-") for d in hgx)  # GPUs, not the NICs
    assert _allocatable(hgx, request["count"], attribute)  # one island of 8 through NVSwitches
    assert not _allocatable(pairs, request["count"], attribute)  # islands of 2: no 4 share one
    assert _allocatable(pairs, 2, attribute)


@pytest.mark.apiserver
@pytest.mark.slow
def test_a_real_api_server_accepts_the_claim(kube_apiserver: Any, snaps: dict[str, t.Snapshot]) -> None:
    device_class, claim = claim_objects()
    with kube_apiserver.admin() as http:
        r = http.post("/apis/resource.k8s.io/v1/deviceclasses", json=device_class)
        assert r.status_code in (201, 409), r.text
        r = http.post("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", json=claim)
        assert r.status_code == 201, r.text
        stored = r.json()["spec"]["devices"]
        assert stored["constraints"] == claim["spec"]["devices"]["constraints"]
        snap = snaps["hgx-h100"]
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "claim-node"}}
        created = http.post("/api/v1/nodes", json=node)
        assert created.status_code in (201, 409), created.text
        uid = http.get("/api/v1/nodes/claim-node").json()["metadata"]["uid"]
        for obj in build_slices(desired_devices(snap, SliceConfig()), node="claim-node", node_uid=uid,
                                cfg=SliceConfig(), version="v1", generation=1):
            r = http.post("/apis/resource.k8s.io/v1/resourceslices", json=obj)
            assert r.status_code in (201, 409), r.text  # the server takes our attributes, pcieSwitch included
        got = http.get("/apis/resource.k8s.io/v1/resourceslices", params={"fieldSelector": "spec.nodeName=claim-node"})
        devices = [d for s in got.json()["items"] for d in s["spec"]["devices"]]
        assert all(f"{P}/pcieSwitch" in d["attributes"] for d in devices if d["name"].startswith("gpu-"))
        http.delete("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/four-gpus-one-nvlink-island")
