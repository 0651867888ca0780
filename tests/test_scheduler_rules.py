"""What ``topolink cluster --emit`` writes, held to each scheduler's own rules on fleets shaped as real clusters
(``tests/scheduler_shapes``): every name within its consumer's limit, distinct, the same every run; no top level
whose value is a host name (kueue#14009); every GPU node in a Kueue flavor or named; then every object created
on a real kube-apiserver with Kueue's, KAI's and Volcano's CRDs and Volcano's ValidatingAdmissionPolicy
installed (``tests/data/crds``, ``tests/data/admission``): the server's schemas, CEL rules and policy judge them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.kube._fleet._levels import fleet_levels
from exporter.kube._fleet._schedulers import kai_topologies, kueue_plan, names, volcano_hypernodes
from tests.apiserver import ApiServer
from tests.apiserver_agent import wait_until
from tests.scheduler_shapes import DOMAIN, HOSTNAME, LEVELS, RACK, SHAPES, P, saved

REPO = Path(__file__).resolve().parents[1]
CRDS, POLICY = REPO / "tests" / "data" / "crds", REPO / "tests" / "data" / "admission" / "hypernodes-validating.yaml"
QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")  # apimachinery's qualified name part
DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PLURAL = {"Topology": "topologies", "ResourceFlavor": "resourceflavors", "HyperNode": "hypernodes"}


def cluster(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))}
    return subprocess.run([sys.executable, "-m", "agent.cli", "cluster", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120, check=False)


def emitted(shape: str, kind: str, tmp: Path) -> tuple[str, list[dict[str, Any]]]:
    flags = [arg for label in LEVELS[shape] for arg in ("--level", label)]
    run = cluster("--from", str(saved(SHAPES[shape](), tmp / f"{shape}.json")), "--emit", kind, *flags)
    assert run.returncode == 0, run.stderr
    return run.stdout, [d for d in yaml.safe_load_all(run.stdout) if d]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_name_fits_its_consumer_and_is_its_own(shape: str) -> None:
    fleet, named = SHAPES[shape](), LEVELS[shape]
    made, _ = kueue_plan(fleet, named, P)
    _, hypernodes = volcano_hypernodes(fleet, named, P)
    kai = [t for _, t, _ in kai_topologies(fleet, named, P)]
    objects = [o for _, t, f in made for o in (t, f)] + kai + hypernodes
    for obj in objects:
        name = obj["metadata"]["name"]
        assert len(name) <= 63 and QUALIFIED.match(name) and DNS.match(name), name
    for kind in {(o["apiVersion"], o["kind"]) for o in objects}:
        listed = [o["metadata"]["name"] for o in objects if (o["apiVersion"], o["kind"]) == kind]
        assert len(listed) == len(set(listed)), (kind, listed)
    tier_names = {h["spec"]["tier"]: h["spec"]["tierName"] for h in hypernodes}
    assert len(set(tier_names.values())) == len(tier_names), tier_names  # one name per tier
    again = volcano_hypernodes(SHAPES[shape](), named, P)[1]
    assert again == hypernodes  # the same fleet: the same names, every run
    for labels in fleet.values():  # the agent's own domain never repeats the host name (older agents' did)
        assert labels[DOMAIN] != labels[HOSTNAME] or shape == "old-no-clique"


def test_names_cut_readably_and_never_meet() -> None:
    long = ("gce-topology-subblock", "c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3")
    got = names({"x": long, "a": ("block-a", "b"), "b": ("block", "a-b"), "c": ("nvl", "X_Y"), "d": ("nvl", "x.y")})
    assert len(got["x"]) == 63 and got["x"].startswith("gce-topology-subblock-c0d1") and re.search(r"-[0-9a-f]{8}$",
                                                                                                    got["x"])
    assert got["a"] != got["b"] and got["a"].startswith("block-a-b-") and len(set(got.values())) == 5
    assert names({"k": ("nvl", "3f6c.1")}) == {"k": "nvl-3f6c.1"}  # valid and short: kept as it is


def test_a_top_level_valued_as_a_host_name_is_dropped() -> None:
    """Kueue keys a top-level domain by its bare value, a lower one by the values above it joined with ',', and
    a node by its bare host name: only a top level can meet a host name (kueue#14009)."""
    old = SHAPES["old-no-clique"]()  # a tray named tray-13 whose domain is "tray-13"
    assert fleet_levels(old, [], P).labels == (RACK, DOMAIN, HOSTNAME)  # under the rack: keyed "rack,tray-13"
    no_rack = {n: {k: v for k, v in labels.items() if k != RACK} for n, labels in old.items()}
    levels = fleet_levels(no_rack, [], P)
    assert levels.labels == (HOSTNAME,) and "kueue#14009" in dict(levels.dropped)[DOMAIN]
    for fleet in (SHAPES["no-clique"](), {n: {k: v for k, v in labels.items() if k != RACK}
                                          for n, labels in SHAPES["no-clique"]().items()}):
        assert fleet_levels(fleet, [], P).labels[-2:] == (DOMAIN, HOSTNAME)  # node_tray-13: a domain of its own


def test_every_gpu_node_is_in_a_flavor_or_said_why(tmp_path: Path) -> None:
    fleet = SHAPES["cloud"]()
    text, docs = emitted("cloud", "kueue", tmp_path)
    flavors = [d for d in docs if d["kind"] == "ResourceFlavor"]
    for name, labels in fleet.items():
        if not any(labels.items() >= f["spec"]["nodeLabels"].items() for f in flavors):
            assert f"#   in no flavor: {name}: no {P}/gpu.product label" in text
    assert "# Kueue v0.15 or later (kueue.x-k8s.io/v1beta2)" in text.splitlines()[0]


def _apply(http: Any, path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] == "CustomResourceDefinition":
            got = http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=doc)
        else:
            kind = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
                    "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}[doc["kind"]]
            got = http.post(f"/apis/admissionregistration.k8s.io/v1/{kind}", json=doc)
        assert got.status_code in (201, 409), got.text


def _established(http: Any, name: str) -> bool:
    status = http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}").json().get("status", {})
    return any(c["type"] == "Established" and c["status"] == "True" for c in status.get("conditions") or [])


def _path(obj: dict[str, Any]) -> str:
    return f"/apis/{obj['apiVersion']}/{PLURAL[obj['kind']]}"


@pytest.mark.apiserver
@pytest.mark.slow
def test_every_shape_passes_the_schedulers_own_rules_on_a_real_api_server(kube_apiserver: ApiServer,
                                                                          tmp_path: Path) -> None:
    with kube_apiserver.admin() as http:
        for crd in sorted(CRDS.glob("*.yaml")):
            _apply(http, crd)
            name = yaml.safe_load(crd.read_text().split("\n---\n")[-1])["metadata"]["name"]
            wait_until(f"{name} established", lambda n=name: _established(http, n), timeout=30, every=0.2)
        _apply(http, POLICY)
        long_member = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                       "metadata": {"name": "policy-in-force"},
                       "spec": {"tier": 2, "members": [{"type": "HyperNode", "selector": {"exactMatch": {
                           "name": "nvlink-domain-gke-ml-training-prod-a3-megagpu-8g-pool-00-9a8b7c6d-h000"}}}]}}

        def refused() -> bool:  # the policy is in force once the server refuses what Volcano's webhook refuses
            got = http.post(_path(long_member), json=long_member)
            if got.status_code == 201:
                http.delete(f"{_path(long_member)}/policy-in-force")
            return got.status_code == 422 and "exactMatch validate failed" in got.text

        wait_until("Volcano's admission policy in force", refused, timeout=60, every=0.5)
        for shape in sorted(SHAPES):
            objects = [o for kind in ("kueue", "kai", "volcano") for o in emitted(shape, kind, tmp_path)[1]]
            assert {o["kind"] for o in objects} >= {"Topology", "ResourceFlavor", "HyperNode"} or shape == "single"
            made = []
            for obj in objects:  # the server is shared: an object of that name made by another test goes first
                http.delete(f"{_path(obj)}/{obj['metadata']['name']}")
                got = http.post(_path(obj), json=obj)
                assert got.status_code == 201, (shape, obj["kind"], obj["metadata"]["name"], got.text)
                made.append(obj)
            for obj in made:
                http.delete(f"{_path(obj)}/{obj['metadata']['name']}")
