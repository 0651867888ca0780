"""Claim classes and templates, pure: a node's groups from its snapshot equal those read back from the slices
its agent publishes (for every machine profile), the templates follow the groups, a class without a group of N
gets no template and a reason, and every object is what resource.k8s.io/v1 allows (kubernetes-validate)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from exporter._core._claim_groups import ClaimGroups, GpuPlace, Group, Pair, claim_groups, places_of
from exporter.kube import (
    ClaimClass,
    ClaimConfig,
    SavedApi,
    SliceConfig,
    claim_plan,
    desired_devices,
    node_class,
    read_claim_classes,
)
from exporter.kube._desired._claim_places import places_from_devices
from exporter.kube._desired._claims import template_name
from tests.cluster_support import SAVED, fleet, kubectl_list
from tests.fakenvml import MACHINES
from tests.kube_support import discover_profile

REPO = Path(__file__).resolve().parent.parent
PROFILES = sorted(p.stem for p in MACHINES.glob("*.yaml"))


@pytest.mark.parametrize("profile", PROFILES)
def test_the_node_and_its_published_slices_make_the_same_groups(profile: str, tmp_path: Path) -> None:
    snap = discover_profile(profile, tmp_path)
    for driver in ("gpu.topology", "topo.example.com"):
        read_back = claim_groups(places_from_devices(desired_devices(snap, SliceConfig(driver=driver)), driver))
        assert read_back == claim_groups(places_of(snap))


def _quad(numa: int) -> dict[str, Any]:
    gpu = {"gpu": {"affinity_node": numa}}
    return {"switch": [{"switch": [gpu, gpu]}, {"switch": [gpu, gpu]}]}


# 8 GPUs under two levels of PCIe switches: pairs under leaf switches (PIX), quads under the switch above (PXB)
TWO_LEVELS = ("rtx4090-8x", {"pci": [{"host_bridge": "0000:16", "children": [_quad(0)]},
                                      {"host_bridge": "0000:98", "children": [_quad(1)]}]})


def test_switch_groups_are_at_every_level_and_the_deepest_that_holds_n_comes_first(tmp_path: Path) -> None:
    snap = discover_profile(TWO_LEVELS[0], tmp_path, TWO_LEVELS[1])
    groups = claim_groups(places_of(snap))
    assert sorted(len(g.buses) for g in groups.switches) == [2, 2, 2, 2, 4, 4]
    read_back = claim_groups(places_from_devices(desired_devices(snap, SliceConfig()), "gpu.topology"))
    assert read_back == groups  # the slices carry the switches above (pcieSwitchesAbove)
    cls = node_class(snap, "two-levels")
    for n, sizes in ((4, [4, 4]), (2, [2, 2, 2, 2, 4, 4]), (3, [4, 4])):
        (template,) = [o for o in claim_plan([cls], n, ClaimConfig()).objects
                       if o["metadata"]["name"].startswith(f"topolink-switch-{n}-")]
        subs = template["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"]
        assert [sub["selectors"][0]["cel"]["expression"].count("0000:") for sub in subs] == sizes
    reasons = {kind: why for _, kind, why in claim_plan([cls], 8, ClaimConfig()).skipped}
    assert reasons["switch"] == "no PCIe switch holds 8 GPUs (the largest holds 4)"


def _places(*islands: tuple[str, ...], rate: float = 1e9) -> list[GpuPlace]:
    return [GpuPlace(device=f"gpu-{bus}", bus=bus, island=i, nvlink_bytes_per_second=rate)
            for i, buses in enumerate(islands) for bus in buses]


def test_islands_are_best_first_and_the_class_follows_their_order() -> None:
    slow = [GpuPlace(device="gpu-a", bus="0000:01:00.0", island=0, nvlink_bytes_per_second=1e9),
            GpuPlace(device="gpu-b", bus="0000:02:00.0", island=0, nvlink_bytes_per_second=2e9)]
    fast = _places(("0000:03:00.0", "0000:04:00.0"), rate=4e9)
    fast = [GpuPlace(device=p.device, bus=p.bus, island=1, nvlink_bytes_per_second=4e9) for p in fast]
    groups = claim_groups([*slow, *fast])
    assert [g.buses for g in groups.islands] == [("0000:03:00.0", "0000:04:00.0"), ("0000:01:00.0", "0000:02:00.0")]
    assert groups.islands[1].bytes_per_second == 1e9  # the slowest member sets the island's rate
    slower = claim_groups([*slow, *(GpuPlace(device=p.device, bus=p.bus, island=1, nvlink_bytes_per_second=5e8)
                                    for p in fast)])
    assert slower.class_id != groups.class_id  # the same islands in another order are another class


def _cls(groups: ClaimGroups) -> ClaimClass:
    return ClaimClass(id=groups.class_id, nodes=("n",), groups=groups)


def test_no_group_of_n_no_template_and_the_reason_is_said() -> None:
    groups = claim_groups(_places(("0000:01:00.0", "0000:02:00.0"), ("0000:03:00.0", "0000:04:00.0")))
    plan = claim_plan([_cls(groups)], 4, ClaimConfig())
    assert [o["kind"] for o in plan.objects] == ["DeviceClass", "DeviceClass"]
    reasons = {kind: why for _, kind, why in plan.skipped}
    assert reasons["nvlink"] == "no NVLink island holds 4 GPUs (the largest holds 2)"
    assert reasons["switch"] == "no PCIe switch joins GPUs" and "NIC" in reasons["gpu-nic"]
    assert "any GPU" in dict((k, w) for _, k, w in claim_plan([_cls(groups)], 1, ClaimConfig()).skipped)["nvlink"]


def test_more_groups_than_a_request_takes_keeps_the_best_eight_and_says_so() -> None:
    islands = [(f"0000:{2 * i + 1:02x}:00.0", f"0000:{2 * i + 2:02x}:00.0") for i in range(10)]
    plan = claim_plan([_cls(claim_groups(_places(*islands)))], 2, ClaimConfig())
    (template,) = [o for o in plan.objects if o["metadata"]["name"].startswith("topolink-nvlink-2-")]
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert len(request["firstAvailable"]) == 8
    assert ("nvlink", "2 more groups left out (at most 8 per request)") in [(k, w) for _, k, w in plan.skipped]


def test_the_settings_name_the_drivers_and_the_attribute() -> None:
    cfg = ClaimConfig(gpu_driver="gpu.example.com", gpu_domain="", nic_driver="nic.example.com",
                      bus_id_attribute="gpu.example.com/pcieBusID", namespace="ml")
    groups = ClaimGroups(islands=(Group(devices=("gpu-0", "gpu-1"), buses=("0000:01:00.0", "0000:02:00.0")),),
                         switches=(), pairs=(), gpus=2)
    plan = claim_plan([_cls(groups)], 2, cfg)
    gpu_class, pair_class, template = plan.objects
    assert gpu_class["spec"]["selectors"][0]["cel"]["expression"] == 'device.driver == "gpu.example.com"'
    assert 'device.driver == "nic.example.com"' in pair_class["spec"]["selectors"][0]["cel"]["expression"]
    sub = template["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"][0]
    assert sub["selectors"][0]["cel"]["expression"] == (
        'has(device.attributes["gpu.example.com"].pcieBusID) && '
        'device.attributes["gpu.example.com"].pcieBusID in ["0000:01:00.0", "0000:02:00.0"]')
    assert template["metadata"]["namespace"] == "ml"


def _reads(expression: str) -> list[tuple[int, str]]:
    return [(m.start(), m.group(0)) for m in re.finditer(r'device\.attributes\["[^"]+"\]\.[A-Za-z_][A-Za-z0-9_]*',
                                                         expression)]


@pytest.mark.parametrize("cfg", [ClaimConfig(), ClaimConfig(nic_driver="nic.example.com"),
                                 ClaimConfig(nic_bus_attributes=("nic.example.com/bdf", "dra.net/pciAddress"))],
                         ids=["dranet", "another-driver", "named"])
def test_every_attribute_read_is_guarded_and_the_nic_matches_by_its_drivers_attributes(cfg: ClaimConfig) -> None:
    """Every read of a device attribute in every selector comes after ``has()`` of that attribute: the API makes
    a read of an attribute a device lacks an error that aborts the allocation."""
    pairs = (Pair(gpu="gpu-0", gpu_bus="0000:01:00.0", nic="mlx5_0", nic_bus="0000:03:00.0", path="PIX"),)
    groups = ClaimGroups(islands=(Group(devices=("gpu-0", "gpu-1"), buses=("0000:01:00.0", "0000:02:00.0")),),
                         switches=(Group(devices=("gpu-0", "gpu-1"), buses=("0000:01:00.0", "0000:02:00.0")),),
                         pairs=pairs, gpus=2)
    plan = claim_plan([_cls(groups)], 2, cfg)
    expressions = [sel["cel"]["expression"] for o in plan.objects for sel in o["spec"].get("selectors", [])]
    expressions += [sel["cel"]["expression"] for o in plan.objects if o["kind"] == "ResourceClaimTemplate"
                    for sub in o["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"]
                    for sel in sub["selectors"]]
    assert len(expressions) == 5
    for expression in expressions:
        for at, read in _reads(expression):
            guard = expression.find(f"has({read})")
            assert expression[at - 4:at] == "has(" or -1 < guard < at, (read, expression)
    (pair,) = [e for e in expressions if "0000:03:00.0" in e]
    nic_part = pair[pair.index(f'device.driver == "{cfg.nic_driver}"'):]
    wanted = {"dranet": {"resource.kubernetes.io", "dra.net"}, "another-driver": {"resource.kubernetes.io"},
              "named": {"nic.example.com", "dra.net"}}
    case = "named" if cfg.nic_bus_attributes else "dranet" if cfg.nic_driver == "dra.net" else "another-driver"
    assert {read.split('"')[1] for _, read in _reads(nic_part)} == wanted[case], pair


@pytest.mark.parametrize("bad", [{"gpu_driver": "GPU.nvidia.com"}, {"bus_id_attribute": "pciBusID"},
                                 {"namespace": "a.b"}, {"nic_driver": ""}])
def test_bad_settings_are_refused(bad: dict[str, str]) -> None:
    from exporter.kube import InvalidObject

    with pytest.raises(InvalidObject):
        ClaimConfig(**bad)


def test_every_object_of_a_fleet_is_valid_v1(tmp_path: Path) -> None:
    saved = json.dumps(kubectl_list(fleet(tmp_path, trays=2, hgx=1))).encode()
    read = read_claim_classes(SavedApi(saved))
    assert len(read.classes) == 2 and not read.problems
    for n in (2, 4, 8):
        for obj in claim_plan(read.classes, n, ClaimConfig()).objects:
            kubernetes_validate.validate(obj, "1.34", strict=True)


@pytest.mark.slow
def test_the_command_writes_yaml_per_class_and_exits_4_without_a_group(tmp_path: Path) -> None:
    def cluster(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "agent.cli", "cluster", "--from", str(SAVED), *args],
                              capture_output=True, text=True, cwd=REPO, timeout=120, check=False)

    run = cluster("--format", "claims", "--gpus", "4")
    assert run.returncode == 0, run.stderr
    docs = [d for d in yaml.safe_load_all(run.stdout) if d]
    names = sorted(d["metadata"]["name"] for d in docs if d["kind"] == "ResourceClaimTemplate")
    assert len([n for n in names if n.startswith("topolink-nvlink-4-")]) == 2
    assert cluster("--format", "claims", "--gpus", "16").returncode == 4
    assert "needs --gpus" in cluster("--format", "claims").stderr
    grouped = json.loads(cluster("--groups", "--format", "json").stdout)["claim_classes"]
    assert {c["gpus"]: c["nvlink_islands"] for c in grouped["classes"]} == {4: {"4": 1}, 8: {"8": 1}}
    assert cluster("--format", "claims", "--gpus", "4", "--gpu-driver", "Bad").returncode == 2


def test_the_page_shows_which_gpus_form_each_group(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from exporter import HttpConfig, MetricsCache, View, create_app

    snap = discover_profile("a6000-8x-nvlink-pairs", tmp_path)
    view = View(snapshot=snap, generation=1)
    html = TestClient(create_app(lambda: view, MetricsCache(lambda: view), HttpConfig())).get("/").text
    groups = claim_groups(places_of(snap))
    section = html.split("Claim groups (ResourceClaimTemplates)", 1)[1].split("<h2>", 1)[0]
    assert f"<code>{groups.class_id}</code>" in section
    for i, island in enumerate(groups.islands):
        names = " ".join(f"GPU{next(g.index for g in snap.gpus if g.id == b)}" for b in island.buses)
        assert f"<td>nvlink-{i}</td><td>{names}</td><td>{' '.join(island.buses)}</td>" in section
    assert f"<td>topolink-gpu-nic-{groups.class_id}</td><td>pair-0</td>" in section


def doc_manifests() -> dict[str, dict[str, Any]]:
    """The Pod, Job and JobSet of docs/claims.md, by kind."""
    text = (REPO / "docs" / "claims.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```yaml\n")[1:]]
    return {doc["kind"]: doc for doc in (yaml.safe_load(b) for b in blocks)}


def pod_spec(manifest: dict[str, Any]) -> dict[str, Any]:
    spec = manifest["spec"]
    if manifest["kind"] == "Job":
        spec = spec["template"]["spec"]
    elif manifest["kind"] == "JobSet":
        (job,) = spec["replicatedJobs"]
        spec = job["template"]["spec"]["template"]["spec"]
    return dict(spec)


def test_the_docs_pod_job_and_jobset_use_the_objects_written_for_their_class(tmp_path: Path) -> None:
    snap = discover_profile("hgx-h100", tmp_path)
    cls = node_class(snap, "hgx")
    names = {o["metadata"]["name"] for o in claim_plan([cls], 4, ClaimConfig()).objects}
    manifests = doc_manifests()
    assert set(manifests) == {"Pod", "Job", "JobSet"}
    for kind, manifest in manifests.items():
        spec = pod_spec(manifest)
        assert spec["nodeSelector"] == {ClaimConfig().class_label: cls.id}, kind
        (claim,) = spec["resourceClaims"]
        assert claim["resourceClaimTemplateName"] == template_name("nvlink", 4, cls.id) in names, kind
        assert spec["containers"][0]["resources"]["claims"] == [{"name": claim["name"]}], kind
        if kind != "JobSet":  # a CRD: its schema is not kubernetes-validate's
            kubernetes_validate.validate(manifest, "1.34", strict=True)


def test_a_class_is_read_from_its_next_member_when_the_first_has_no_slices(tmp_path: Path) -> None:
    small = fleet(tmp_path, trays=2, hgx=1)
    small.slices = [s for s in small.slices if s["spec"]["nodeName"] != "tray-00"]
    read = read_claim_classes(SavedApi(json.dumps(kubectl_list(small)).encode()))
    assert len(read.classes) == 2 and not read.problems
    small.slices = [s for s in small.slices if s["spec"]["nodeName"] != "tray-01"]
    read = read_claim_classes(SavedApi(json.dumps(kubectl_list(small)).encode()))
    assert [c.nodes for c in read.classes] == [("hgx-0",)]
    assert read.problems == ("class 61ceeef91034: none of nodes tray-00, tray-01 has a ResourceSlice of gpu.topology: "
                             "left out",)
