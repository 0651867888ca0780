"""``topolink doctor`` on the real API server: each thing the agent's settings need and the cluster lacks is one
MISSING line with its fix, and exit 1; once each is there, ``ok`` and exit 0. The RuntimeClass, the NodeFeature
CRD (asked for only with labelsVia=nodefeature), and the permissions of every sink asked for, reviewed by the
server for the agent's ServiceAccount (SubjectAccessReview) or for the caller (SelfSubjectAccessReview, with a
token of the agent's account). The NVIDIA driver check runs against a machine profile's test NVML, and a library
that is not there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from exporter.kube import policy_rules
from tests.apiserver import ApiServer
from tests.apiserver_agent import agent_token, wait_until

pytestmark = [pytest.mark.apiserver]

REPO = Path(__file__).resolve().parents[1]
NS = "doctor"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
RUNTIME = "/apis/node.k8s.io/v1/runtimeclasses"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NFD_NS = "node-feature-discovery"  # serve's --nfd-namespace default outside a pod
NFD_CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",  # NFD's, schema left open
           "metadata": {"name": "nodefeatures.nfd.k8s-sigs.io"},
           "spec": {"group": "nfd.k8s-sigs.io", "scope": "Namespaced",
                    "names": {"kind": "NodeFeature", "listKind": "NodeFeatureList", "plural": "nodefeatures",
                              "singular": "nodefeature"},
                    "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def doctor(*args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG", "POD_"))}
    more = ["--kubeconfig", str(kubeconfig)] if kubeconfig else []
    return subprocess.run([sys.executable, "-m", "agent.cli", "doctor", *args, *more], capture_output=True, text=True,
                          timeout=120, check=False, cwd=REPO, env={**env, "PYTHONPATH": str(REPO)})


def _grant(http: httpx.Client, uses: tuple[str, ...]) -> None:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "doctor-agent"},
            "rules": policy_rules(uses)}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "doctor-agent"}, "subjects": [{"kind": "ServiceAccount", "name": "topolink",
                                                                   "namespace": NS}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "doctor-agent"}}
    for path, obj in ((f"{RBAC}/clusterroles", role), (f"{RBAC}/clusterrolebindings", binding)):
        resp = http.patch(f"{path}/{obj['metadata']['name']}", params={"fieldManager": "tests", "force": "true"},
                          json=obj, headers={"Content-Type": "application/apply-patch+yaml"})
        assert resp.status_code in (200, 201), resp.text


def _without_nfd(http: httpx.Client) -> None:
    """The premise of both NFD tests, made rather than assumed: the shared server may hold the CRD another test
    file installed."""
    http.delete(f"{CRDS}/{NFD_CRD['metadata']['name']}")
    wait_until("NodeFeatures gone", lambda: http.get("/apis/nfd.k8s-sigs.io/v1alpha1").status_code == 404)


def _lines(out: str) -> dict[str, str]:
    return {line.split(":", 1)[0][8:]: line[:8].strip() for line in out.splitlines() if not line.startswith(" ")}


def test_what_is_missing_is_named_with_its_fix_until_it_is_there(kube_apiserver: ApiServer) -> None:
    admin = kube_apiserver.kubeconfig()
    with kube_apiserver.admin() as http:
        http.delete(f"{RUNTIME}/nvidia")
        _without_nfd(http)
        agent_token(http, "doctor-node", namespace=NS)  # the namespace and the agent's ServiceAccount
        _grant(http, ("resource-slices",))
        run = doctor("--no-node", "--service-account", f"{NS}/topolink", "--labels-via", "nodefeature",
                     kubeconfig=admin)
        assert run.returncode == 1, run.stderr
        seen = _lines(run.stdout)
        assert seen == {"RuntimeClass nvidia": "MISSING", "NodeFeature CRD (nfd.k8s-sigs.io/v1alpha1)": "MISSING",
                        f"RBAC for node-feature of {NS}/topolink": "MISSING",
                        f"RBAC for resource-slices of {NS}/topolink": "ok"}, run.stdout
        assert run.stdout.count("fix: ") == 3 and "create nodefeatures.nfd.k8s-sigs.io in namespace" in run.stdout

        run = doctor("--no-node", "--service-account", f"{NS}/topolink", "--device-taint-rules", kubeconfig=admin)
        assert _lines(run.stdout)[f"RBAC for node-labels of {NS}/topolink"] == "MISSING"
        assert _lines(run.stdout)[f"RBAC for device-taint-rules of {NS}/topolink"] == "MISSING"

        assert http.post(RUNTIME, json={"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                        "metadata": {"name": "nvidia"}, "handler": "nvidia"}).status_code in (201, 409)
        _grant(http, ("node-labels", "resource-slices"))
        run = doctor("--no-node", "--service-account", f"{NS}/topolink", kubeconfig=admin)
        assert run.returncode == 0 and set(_lines(run.stdout).values()) == {"ok"}, run.stdout
        # as the caller: the agent's own token (it may not read RuntimeClasses: said so, with what to do)
        token = agent_token(http, "doctor-node", namespace=NS).token
        run = doctor("--no-node", kubeconfig=kube_apiserver.kubeconfig(token))
        assert _lines(run.stdout) == {"RuntimeClass nvidia": "MISSING", "RBAC for node-labels": "ok",
                                      "RBAC for resource-slices": "ok"}, run.stdout
        assert "cannot be read" in run.stdout and run.returncode == 1
        http.delete(f"{RBAC}/clusterrolebindings/doctor-agent")
        http.delete(f"{RBAC}/clusterroles/doctor-agent")


def test_the_driver_check_loads_nvml_as_discovery_does() -> None:
    run = subprocess.run([sys.executable, "-m", "tests.fakenvml", "run", "hgx-h100", "--", sys.executable, "-m",
                          "agent.cli", "doctor", "--no-cluster"], capture_output=True, text=True, timeout=300,
                         check=False, cwd=REPO)
    assert run.returncode == 0 and run.stdout == "ok      NVIDIA driver (NVML): 8 GPU(s)\n", run.stdout + run.stderr
    run = doctor("--no-cluster", "--nvml-library", "/nonexistent/libnvidia-ml.so.1")
    assert run.returncode == 1 and run.stdout.startswith("MISSING NVIDIA driver (NVML): ")
    assert "fix: install the NVIDIA driver" in run.stdout


def test_serve_warns_at_start_and_names_the_missing_nodefeature_crd_once(kube_apiserver: ApiServer,
                                                                         tmp_path: Path) -> None:
    """NFD mode without NFD: serve's preflight (doctor's checks) says once that the CRD is not served, with the
    fix; every failed write says it once per failure streak, not a bare 404; the agent still serves."""
    from tests.apiserver_agent import create_node, ensure, json_lines, start_serve
    from tests.fakenvml import materialize

    node = "preflight-nfd"
    with kube_apiserver.admin() as http:
        _without_nfd(http)
        create_node(http, node)
    served = start_serve(kube_apiserver, materialize("hgx-h100", tmp_path / "machine"), node, tmp_path,
                         "--labels-via", "nodefeature", "--no-resource-slices")
    try:
        served.pass_now()
        served.pass_now()
        assert "topolink_sink_publish_total" in served.metrics()  # still serving after failed passes

        def events(name: str) -> list[dict[str, object]]:
            return [e for e in json_lines(served.lines()) if e.get("event") == name]

        pre = wait_until("the preflight line", lambda: events("preflight: missing"))
        assert [e["check"] for e in pre] == ["NodeFeature CRD (nfd.k8s-sigs.io/v1alpha1)"], pre
        assert str(pre[0]["fix"]).startswith("install Node Feature Discovery") and "--labels-via node" in str(
            pre[0]["fix"])
        failed = [e for e in events("publish failed") if e["sink"] == "node-feature"]
        assert len(failed) == 1, failed  # three failed passes (and their requeues), one line
        detail = str(failed[0]["detail"])
        assert detail.startswith("NotFound: the NodeFeature CRD (nfd.k8s-sigs.io/v1alpha1) is not served"), detail
        assert "install Node Feature Discovery" in detail and "--labels-via node" in detail

        with kube_apiserver.admin() as http:  # the fix arrives: the agent writes without a restart
            assert http.post(CRDS, json=NFD_CRD).status_code == 201
            wait_until("NodeFeatures served", lambda: http.get("/apis/nfd.k8s-sigs.io/v1alpha1").status_code == 200)
            ensure(http, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": NFD_NS}})
        served.pass_now()
        # one line on recovery; the failed syncs it counts are the three passes and the requeues between them
        (recovered,) = [e["failed_passes"] for e in events("publish recovered") if e["sink"] == "node-feature"]
        assert isinstance(recovered, int) and recovered >= 3, recovered
    finally:
        assert served.stop() == 0
        with kube_apiserver.admin() as http:  # as the tier found it: no NFD
            http.delete(f"{CRDS}/{NFD_CRD['metadata']['name']}")
            wait_until("NodeFeatures gone", lambda: http.get("/apis/nfd.k8s-sigs.io/v1alpha1").status_code == 404)
