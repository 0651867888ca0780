"""``topolink cluster --emit``: Kueue's Topology and ResourceFlavor, Volcano's HyperNodes and Slurm's block
topology, from a fleet's node labels. The level rules as pure functions; the objects created on a real
kube-apiserver with the upstream CRDs installed (``tests/data/crds``), so their schemas and CEL rules judge them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.kube._fleet._levels import HOSTNAME, MAX_LEVELS, fleet_levels, own_levels
from exporter.kube._fleet._schedulers import dns_name, kueue_objects, volcano_hypernodes
from exporter.kube._fleet._slurm import slurm_topology
from tests.apiserver import ApiServer
from tests.apiserver_agent import wait_until
from tests.scheduler_fleet import LEAF, SAVED, SPINE, scheduler_fleet

REPO = Path(__file__).resolve().parents[1]
CRDS = REPO / "tests" / "data" / "crds"
P = "gpu.topology"
DOMAIN, RACK = own_levels(P)


def node(name: str, **labels: str) -> dict[str, str]:
    return {HOSTNAME: name, f"{P}/gpu.count": "4", **{k.replace("__", "/").replace("_", "."): v
                                                        for k, v in labels.items()}}


def test_hostname_is_last_and_every_level_is_on_every_node() -> None:
    nodes = {f"n{i}": {HOSTNAME: f"n{i}", DOMAIN: f"d{i // 2}", SPINE: "s", LEAF: f"l{i // 4}"} for i in range(8)}
    del nodes["n7"][LEAF]
    levels = fleet_levels(nodes, [SPINE, LEAF], P)
    assert levels.labels == (SPINE, DOMAIN, HOSTNAME)
    assert dict(levels.dropped)[LEAF] == "missing on 1 of 8 nodes (first: n7)"
    assert dict(levels.dropped)[RACK].startswith("missing on 8 of 8")


def test_a_level_that_splits_a_lower_group_or_repeats_it_is_dropped() -> None:
    nodes = {f"n{i}": {HOSTNAME: f"n{i}", DOMAIN: f"d{i // 2}", RACK: f"r{i // 2}", LEAF: f"l{(i + 1) // 3}"}
             for i in range(6)}
    levels = fleet_levels(nodes, [LEAF], P)
    assert levels.labels == (DOMAIN, HOSTNAME)
    why = dict(levels.dropped)
    assert why[RACK] == f"groups the nodes exactly as {DOMAIN} does"
    assert why[LEAF].startswith(f"does not hold {DOMAIN}=d2 whole")


def test_a_rack_holding_several_nvlink_partitions_sits_above_them() -> None:
    nodes = {f"n{i}": {HOSTNAME: f"n{i}", DOMAIN: f"d{i // 2}", RACK: f"r{i // 4}"} for i in range(8)}
    assert fleet_levels(nodes, [], P).labels == (RACK, DOMAIN, HOSTNAME)
    spanning = {n: {**v, RACK: f"r{int(n[1:]) // 2 % 2}", DOMAIN: f"d{int(n[1:]) // 4}"} for n, v in nodes.items()}
    assert fleet_levels(spanning, [], P).labels[:1] == (DOMAIN,)  # a domain over two racks: it is the higher


def test_no_level_is_invented_under_the_reserved_prefix_and_kueue_takes_sixteen() -> None:
    with pytest.raises(ValueError, match="reserved"):
        own_levels("topology.kubernetes.io")
    # level k: the first k nodes alone, the rest together (k + 1 groups, each level nesting over the next)
    nodes = {f"n{i}": {HOSTNAME: f"n{i}", **{f"x/l{k}": str(i) if i < k else "rest" for k in range(1, 19)}}
             for i in range(20)}
    levels = fleet_levels(nodes, [f"x/l{k}" for k in range(1, 19)], P)
    assert len(levels.labels) == MAX_LEVELS and levels.labels[-1] == HOSTNAME and levels.labels[0] == "x/l4"
    assert [label for label, why in levels.dropped if "16 levels" in why] == ["x/l1", "x/l2", "x/l3"]


def test_names_are_dns_subdomains_and_distinct() -> None:
    assert dns_name("nvlink-domain", "3f6c.1") == "nvlink-domain-3f6c.1"
    assert dns_name("topolink", "NVIDIA-GB200") != dns_name("topolink", "nvidia-gb200") == "topolink-nvidia-gb200"
    assert dns_name("a", "x_y") != dns_name("a", "x.y")


@pytest.fixture(scope="module")
def labels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    fleet = scheduler_fleet(tmp_path_factory.mktemp("fleet"))
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in fleet.nodes}


def test_the_saved_fleet_is_what_the_sinks_compute_today(labels: dict[str, dict[str, str]]) -> None:
    saved = {i["metadata"]["name"]: i["metadata"]["labels"] for i in json.loads(SAVED.read_text())["items"]
             if i["kind"] == "Node"}
    assert saved == labels, "regenerate it: python -m tests.scheduler_fleet"


def test_kueue_per_product_levels_hold_on_every_flavor_node(labels: dict[str, dict[str, str]]) -> None:
    made = {t["metadata"]["name"]: (lv, t, f) for lv, t, f in kueue_objects(labels, [SPINE, LEAF], P)}
    gb200 = next(v for k, v in made.items() if "gb200" in k)
    hgx = next(v for k, v in made.items() if "h100" in k)
    assert gb200[0].labels == (SPINE, LEAF, DOMAIN, HOSTNAME)
    assert hgx[0].labels == (LEAF, HOSTNAME)  # one spine and one leaf over them; each its own NVLink domain
    assert dict(gb200[0].dropped)[RACK] == f"groups the nodes exactly as {DOMAIN} does"  # an NVL72: rack = domain
    for levels, topology, flavor in made.values():
        selected = [lab for lab in labels.values() if lab.items() >= flavor["spec"]["nodeLabels"].items()]
        assert selected and all(level in lab for lab in selected for level in levels.labels)
        assert topology["spec"]["levels"][-1] == {"nodeLabel": HOSTNAME}
        assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]


def test_volcano_tiers_and_slurm_blocks(labels: dict[str, dict[str, str]]) -> None:
    levels, hypernodes = volcano_hypernodes(labels, [SPINE, LEAF], P)
    assert levels.labels == (SPINE, LEAF, DOMAIN, HOSTNAME)
    tiers = {h["spec"]["tier"]: [x for x in hypernodes if x["spec"]["tier"] == h["spec"]["tier"]] for h in hypernodes}
    assert sorted(tiers) == [1, 2, 3] and [len(tiers[t]) for t in (1, 2, 3)] == [5, 3, 1]
    assert {h["spec"]["tierName"] for h in tiers[1]} == {"nvlink-domain"}
    names = {h["metadata"]["name"] for h in hypernodes}
    for h in tiers[2] + tiers[3]:
        assert {m["selector"]["exactMatch"]["name"] for m in h["spec"]["members"]} <= names
    plan = slurm_topology(labels, [], P)
    entry = plan.entries[0]
    assert sorted(b["nodes"] for b in entry["block"]["blocks"]) == [
        "tray-00,tray-01,tray-02", "tray-03,tray-04,tray-05", "tray-06,tray-07,tray-08"]
    assert entry["block"]["block_sizes"] == [3] and [n for n, _ in plan.alone] == ["hgx-0", "hgx-1"]


def cluster(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))}
    return subprocess.run([sys.executable, "-m", "agent.cli", "cluster", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120, check=False)


def emitted(kind: str) -> list[dict[str, Any]]:
    run = cluster("--from", str(SAVED), "--emit", kind, "--level", SPINE, "--level", LEAF)
    assert run.returncode == 0, run.stderr
    return [d for d in yaml.safe_load_all(run.stdout) if d]


@pytest.mark.slow
def test_the_command_refuses_bad_levels_in_one_line() -> None:
    run = cluster("--from", str(SAVED), "--emit", "kueue", "--level", "not a label")
    assert run.returncode == 2 and run.stderr.endswith("'not a label': not a node-label key\n")
    assert len(run.stderr.splitlines()) == 1
    run = cluster("--from", str(SAVED), "--emit", "kueue", "--label-prefix", "topology.kubernetes.io")
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "--label-prefix" in run.stderr
    assert "not under kubernetes.io or k8s.io" in run.stderr  # the one settings rule, before any level is read
    run = cluster("--from", str(SAVED), "--emit", "volcano", "--format", "json")
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "do not apply" in run.stderr
    (slurm,) = emitted("slurm")
    assert slurm[0]["block"]["block_sizes"] == [3] and slurm[1]["topology"] == "topolink-tree"


def _install(http: Any, path: Path) -> str:
    crd = yaml.safe_load(path.read_text())
    got = http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
    assert got.status_code in (201, 409), got.text
    name = crd["metadata"]["name"]

    def established() -> bool:
        status = http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").json().get("status", {})
        return any(c["type"] == "Established" and c["status"] == "True" for c in status.get("conditions") or [])

    wait_until(f"{name} established", established, timeout=30, every=0.2)
    return str(name)


def _create(http: Any, obj: dict[str, Any]) -> Any:
    group, version = obj["apiVersion"].split("/")
    plural = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "HyperNode": "hypernodes"}[obj["kind"]]
    return http.post(f"/apis/{group}/{version}/{plural}", json=obj)


@pytest.mark.apiserver
@pytest.mark.slow
def test_the_objects_pass_the_upstream_crds_on_a_real_api_server(kube_apiserver: ApiServer) -> None:
    objects = emitted("kueue") + emitted("volcano")
    with kube_apiserver.admin() as http:
        for crd in sorted(CRDS.glob("*.yaml")):
            _install(http, crd)
        bad = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "hostname-first"},
               "spec": {"levels": [{"nodeLabel": HOSTNAME}, {"nodeLabel": DOMAIN}]}}
        refused = _create(http, bad)  # the CRD's own CEL rules are in force: a wrong object is refused
        assert refused.status_code == 422 and "lowest level" in refused.text
        for obj in objects:
            got = _create(http, obj)
            assert got.status_code == 201, (obj["metadata"]["name"], got.text)
        kinds = [o["kind"] for o in objects]
        assert kinds.count("Topology") == kinds.count("ResourceFlavor") == 2 and kinds.count("HyperNode") == 9


@pytest.mark.apiserver
@pytest.mark.slow
def test_live_reads_what_the_saved_list_says(kube_apiserver: ApiServer, tmp_path: Path) -> None:
    """The fleet's nodes created on a real API server (under a prefix of their own: the server is shared) emit
    what the saved list emits: the read pages the labels as it pages them from the file."""
    prefix = "emit.topology.example"
    saved = json.loads(SAVED.read_text())
    with kube_apiserver.admin() as http:
        for item in saved["items"]:
            if item["kind"] != "Node":
                continue
            labels = {k.replace("gpu.topology/", f"{prefix}/"): v for k, v in item["metadata"]["labels"].items()}
            name = f"emit-{item['metadata']['name']}"
            labels |= {HOSTNAME: name}
            got = http.post("/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node",
                                                   "metadata": {"name": name, "labels": labels}})
            assert got.status_code == 201, got.text
    local = tmp_path / "fleet.json"
    listed = [{**i, "metadata": {"name": f"emit-{i['metadata']['name']}", "labels": {
        **{k.replace("gpu.topology/", f"{prefix}/"): v for k, v in i["metadata"]["labels"].items()},
        HOSTNAME: f"emit-{i['metadata']['name']}"}}} for i in saved["items"] if i["kind"] == "Node"]
    local.write_text(json.dumps({"kind": "List", "items": listed}))
    for kind in ("kueue", "volcano", "slurm"):
        args = ("--emit", kind, "--label-prefix", prefix, "--level", SPINE, "--level", LEAF, "--page-size", "3")
        live = cluster(*args, "--kubeconfig", str(kube_apiserver.kubeconfig()))
        offline = cluster(*args, "--from", str(local))
        assert live.returncode == offline.returncode == 0, live.stderr + offline.stderr
        assert live.stdout == offline.stdout and live.stdout.count("\n") > 10
    assert "emit-tray-00,emit-tray-01,emit-tray-02" in live.stdout  # the last: slurm's blocks name the nodes
