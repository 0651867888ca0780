"""``topolink cluster``: the fleet read back from labels and ResourceSlices in pages, folded into node summaries,
and the fleet report: against a paging fake of the list API, against kmock over HTTP (the command as a user
runs it), and against a real kube-apiserver (the ``apiserver`` tier)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import topology as t
from exporter.kube import Expired, LightkubeApi, cluster_document, cluster_table, read_cluster
from tests.cluster_support import Fleet, P, PagedApi, fleet, summaries_by_node
from tests.kmock_support import NODES, SLICES

REPO = Path(__file__).resolve().parents[1]
CLIQUE = "3f6c2a1e-8d4b-4c2f-9a57-0e1b2c3d4e5f.1"
GB = 1e9


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return fleet(tmp_path_factory.mktemp("fleet"))


def test_both_lists_are_read_in_pages(small: Fleet) -> None:
    api = PagedApi(small)
    read = read_cluster(api, limit=4)
    nodes = [r for r in api.requests if r[0] == "/api/v1/nodes"]
    slices = [r for r in api.requests if r[0].endswith("/resourceslices")]
    assert len(nodes) == 5 and len(slices) == 5  # 20 labelled nodes, 20 slices: pages of 4
    assert all(r[1]["limit"] == "4" for r in api.requests)
    assert [r[1].get("continue") for r in nodes] == [None, "4", "8", "12", "16"]
    assert nodes[0][1]["labelSelector"] == f"{P}/gpu.count" and "PartialObjectMetadataList" in str(nodes[0][2])
    assert slices[0][0] == "/apis/resource.k8s.io/v1/resourceslices"
    assert slices[0][1]["fieldSelector"] == f"spec.driver={P}"
    assert len(read.summaries) == 20 and read.pages == 10 and read.slices == 20 and read.without_slices == ()


def test_an_expired_continue_token_lists_again_once_and_counts_nothing_twice(small: Fleet) -> None:
    plain = read_cluster(PagedApi(small), limit=4)
    api = PagedApi(small, expire=[2, 7])  # one during the nodes, one during the slices
    again = read_cluster(api, limit=4)
    assert again.summaries == plain.summaries and again.restarts == 2
    with pytest.raises(Expired):
        read_cluster(PagedApi(small, expire=[1, 2]), limit=4)  # expired again after starting over: give up


def test_a_summary_is_what_the_labels_and_slices_say(small: Fleet) -> None:
    by = summaries_by_node(read_cluster(PagedApi(small)).summaries)
    assert set(by) == {f"tray-{i:02d}" for i in range(18)} | {"hgx-0", "hgx-1"}  # not the node without labels
    tray, box = by["tray-00"], by["hgx-0"]
    assert (tray.product, tray.gpus, tray.clique) == ("NVIDIA-GB200", 4, CLIQUE)
    assert box.clique is None  # its nvlink-domain label is its own name: a domain of one node
    assert dict(box.busbw) == {2: 256 * GB, 4: 256 * GB, 8: 256 * GB} and box.busbw_source == "estimate"
    assert box.nvlink_bytes_per_second == 450 * GB and box.nic_bytes_per_second == 8 * 50 * GB  # 18 x NVLink4, 8 NDR
    assert tray.nvlink_bytes_per_second == 900 * GB and dict(tray.busbw)[4] == 512 * GB
    assert dict(by["tray-17"].busbw)[4] == 256 * GB


def test_the_report_finds_the_slow_tray_and_where_16_gpus_fit(small: Fleet) -> None:
    read = read_cluster(PagedApi(small))
    report = t.fleet_report(read.summaries, gpus=16)
    rack, hgx = report.classes
    assert (rack.domain, rack.product, rack.nodes, rack.gpus) == (CLIQUE, "NVIDIA-GB200", 18, 72)
    assert [(o.node, o.size, round(o.ratio, 2)) for o in rack.outliers] == [("tray-17", 4, 0.5)]
    assert hgx.outliers == () and dict(hgx.medians)[8] == 256 * GB
    best = report.fits[0]
    assert (best.kind, best.where, len(best.nodes), best.source) == ("nvlink-domain", CLIQUE, 4, "estimate")
    assert "tray-17" not in best.nodes and best.busbw_bytes_per_second == 512 * GB
    network = next(f for f in report.fits if f.kind == "network" and f.where == "NVIDIA-H100-80GB-HBM3")
    assert network.nodes == ("hgx-0", "hgx-1")  # 8 NDR NICs (400 GB/s, theoretical) outrun the nodes' 256
    assert (network.busbw_bytes_per_second, network.limit) == (256 * GB, "the nodes' best groups")
    trays = next(f for f in report.fits if f.kind == "network" and f.where == "NVIDIA-GB200")
    assert (trays.busbw_bytes_per_second, trays.source) == (8 * 50 * GB, "theoretical")  # 8 NDR NICs a tray
    doc = json.loads(json.dumps(cluster_document(read, report)))
    assert doc["schema"] == "topolink.cluster/v1" and doc["fits"][0]["kind"] == "nvlink-domain"
    table = cluster_table(doc)
    assert "Outliers" in table and "tray-17" in table and "Where 16 GPUs fit best:" in table
    assert "estimates" in table and "theoretical" in table


def test_a_pool_keeps_only_its_newest_generation(small: Fleet) -> None:
    stale = [dict(s, metadata={"name": s["metadata"]["name"] + "-old"},
                  spec={**s["spec"], "pool": {**s["spec"]["pool"], "generation": 0}, "devices": []})
             for s in small.slices]
    read = read_cluster(PagedApi(Fleet(nodes=small.nodes, slices=stale + small.slices)))
    assert summaries_by_node(read.summaries)["hgx-0"].nic_bytes_per_second == 8 * 50 * GB


def test_what_a_summary_leaves_unknown(small: Fleet) -> None:
    """A GPU without NVLink facts leaves its node's NVLink rate unknown, the slowest known GPU sets it otherwise,
    NICs without a rate add nothing; a domain named after the node is none; a GPU count that is no number makes
    no summary, and the node still counts as labelled."""
    import copy

    fleet_ = copy.deepcopy(small)
    slice_of = {s["spec"]["nodeName"]: s for s in fleet_.slices}
    first, second = (slice_of[n]["spec"]["devices"] for n in ("hgx-0", "hgx-1"))
    del first[3]["attributes"][f"{P}/nvlinkGen"]  # one GPU of hgx-0 with no generation
    second[5]["attributes"][f"{P}/nvlinkCount"] = {"int": 9}  # one GPU of hgx-1 with half its links
    for nic in second[8:]:
        del nic["attributes"][f"{P}/rateGbps"]
    for node in fleet_.nodes:
        labels = node["metadata"]["labels"]
        if node["metadata"]["name"] == "tray-01":
            labels[f"{P}/nvlink-domain"] = "tray-01"
        if node["metadata"]["name"] == "tray-02":
            labels[f"{P}/gpu.count"] = "four"
    fleet_.slices = [s for s in fleet_.slices if s["spec"]["nodeName"] != "tray-02"]
    read = read_cluster(PagedApi(fleet_), limit=3)
    by = summaries_by_node(read.summaries)
    assert by["hgx-0"].nvlink_bytes_per_second is None and by["hgx-0"].nic_bytes_per_second == 8 * 50 * GB
    assert by["hgx-1"].nvlink_bytes_per_second == 225 * GB and by["hgx-1"].nic_bytes_per_second is None
    assert by["tray-01"].clique is None and by["tray-00"].clique == CLIQUE and by["hgx-0"].clique is None
    assert "tray-02" not in by and read.without_slices == ("tray-02",) and len(by) == 19


def kubeconfig(url: str, where: Path) -> Path:
    path = where / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "k",
        "clusters": [{"name": "k", "cluster": {"server": url}}], "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "k", "context": {"cluster": "k", "user": "u"}}]}))
    return path


def cluster(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))}
    return subprocess.run([sys.executable, "-m", "agent.cli", "cluster", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120, check=False)


@pytest.mark.asyncio
async def test_the_command_over_http_against_kmock(kmock: Any, small: Fleet, tmp_path: Path) -> None:
    for node in small.nodes:
        kmock.objects[NODES, None, node["metadata"]["name"]] = node
    for obj in small.slices:
        kmock.objects[SLICES, None, obj["metadata"]["name"]] = obj
    kmock.resources[SLICES] = {"kind": "ResourceSlice", "namespaced": False, "verbs": ["get", "list", "watch"]}
    config = kubeconfig(str(kmock.url).rstrip("/"), tmp_path)
    run = await asyncio.to_thread(cluster, "--kubeconfig", str(config), "--gpus", "16", "--format", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["nodes"] == 20 and doc["slices"] == 20 and doc["fits"][0]["kind"] == "nvlink-domain"
    assert [o["node"] for c in doc["classes"] for o in c["outliers"]] == ["tray-17"]
    table = await asyncio.to_thread(cluster, "--kubeconfig", str(config), "--gpus", "16")
    assert table.returncode == 0 and "NVIDIA-GB200" in table.stdout and "nvlink-domain" in table.stdout
    nowhere = await asyncio.to_thread(cluster, "--kubeconfig", str(config), "--gpus", "1000")
    assert nowhere.returncode == 4 and "nowhere" in nowhere.stdout


def test_usage_and_unreachable_servers_are_one_line(tmp_path: Path) -> None:
    missing = cluster("--kubeconfig", str(tmp_path / "none"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert cluster("--gpus", "0").returncode == 2
    refused = cluster("--kubeconfig", str(kubeconfig("http://127.0.0.1:9", tmp_path)))
    assert refused.returncode == 1 and refused.stderr.startswith("topolink cluster: ")
    assert refused.stderr.count("\n") == 1


@pytest.mark.apiserver
@pytest.mark.slow
def test_pages_from_a_real_api_server(kube_apiserver: Any, tmp_path: Path) -> None:
    ours = "fleet.example.com"  # the session's server holds other tests' nodes: this fleet has a prefix of its own
    small = fleet(tmp_path, prefix=ours)
    with kube_apiserver.admin() as http:
        for node in small.nodes:
            r = http.post("/api/v1/nodes", json=node)
            assert r.status_code in (201, 409), r.text
        uids = {n["metadata"]["name"]: n["metadata"]["uid"] for n in http.get("/api/v1/nodes").json()["items"]}
        for obj in small.slices:
            owner = obj["metadata"]["ownerReferences"][0]
            body = {**obj, "metadata": {**obj["metadata"], "ownerReferences": [{**owner, "uid": uids[owner["name"]]}]}}
            r = http.post("/apis/resource.k8s.io/v1/resourceslices", json=body)
            assert r.status_code in (201, 409), r.text
    api = LightkubeApi.connect(kubeconfig=str(kube_apiserver.kubeconfig()))
    mark = kube_apiserver.audit_mark()
    read = read_cluster(api, prefix=ours, driver=ours, limit=3)
    lists = [e for e in kube_apiserver.audit(mark) if e["verb"] == "list"]
    nodes = [e for e in lists if e["objectRef"]["resource"] == "nodes"]
    assert len(nodes) == 7 and all("limit=3" in e["requestURI"] for e in lists)  # 20 nodes in pages of 3
    assert sum("continue=" in e["requestURI"] for e in nodes) == 6
    by = summaries_by_node(read.summaries)
    assert len(by) == 20 and read.slices == 20 and by["tray-03"].clique == CLIQUE
    assert by["hgx-0"].nic_bytes_per_second == 8 * 50 * GB and by["hgx-0"].nvlink_bytes_per_second == 450 * GB
    report = t.fleet_report(read.summaries, gpus=16)
    assert report.fits[0].kind == "nvlink-domain" and [o.node for o in report.classes[0].outliers] == ["tray-17"]
