"""The Helm chart (daemonset/chart), run by real Helm (helm-sdkpy: Helm 4's Go library) against the real API
server: it is current with the kustomize overlays it is made from (``python -m tests.chart_support``), it
lints, it installs the objects kustomize builds for the same choices (object by object), an upgrade with a
changed value reaches the DaemonSet, going back to the old values brings the old one back, and an uninstall
leaves nothing of ours. Without helm-sdkpy (scripts/test.sh installs it) the Helm tests are skipped with one line."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.apiserver import SKIP, ApiServer, assets, running
from tests.chart_support import CHART, CHECKSUM, DASHBOARD, ROLLED, chart_files, key, kustomize, unhashed

helm = pytest.importorskip("helm_sdkpy", reason="helm-sdkpy is not installed: scripts/test.sh installs it "
                                                "(pip install --ignore-requires-python helm-sdkpy)")

RELEASE, NAMESPACE = "topolink", "topolink"
# No uninstall hook: its Job would wait for a kubelet this server has not (tests/test_apiserver_uninstall_hook.py
# runs it, playing the kubelet, on a control plane).
NO_HOOK = {"pruneOnUninstall": False}
CHOICES = {"default": NO_HOOK, "nfd": {"settings": {"labelsVia": "nodefeature"}, **NO_HOOK}}


def test_the_chart_is_current_with_the_overlays() -> None:
    on_disk = {str(p.relative_to(CHART)): p.read_text() for p in CHART.rglob("*")
               if p.is_file() and p.name != "Chart.yaml" and p.parent.name != "docs"}
    assert on_disk == chart_files(), "daemonset/chart is stale: run .venv/bin/python -m tests.chart_support"


def test_every_value_is_documented() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() and not line.lstrip().startswith("#"):
            assert i > 0 and lines[i - 1].lstrip().startswith("#"), f"values.yaml: {line!r} has no comment above"


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def chart_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """An API server of this module's own: a release installs only where no other test left objects of the
    same names (Helm refuses to adopt what it did not install, as it would in a cluster)."""
    found = assets()
    if found is None:
        pytest.skip(SKIP)
    yield from running(found, tmp_path_factory.mktemp("chart-apiserver"))


@pytest.fixture
def helm_config(chart_apiserver: ApiServer, tmp_path: Path) -> Iterator[Any]:
    with helm.Configuration(namespace=NAMESPACE, kubeconfig=str(chart_apiserver.kubeconfig())) as config:
        yield config
        with contextlib.suppress(helm.HelmError):  # what a failed test left
            _run(helm.Uninstall(config).run(RELEASE, wait=False))


def test_the_chart_lints() -> None:
    with helm.Configuration(namespace=NAMESPACE) as config:
        result = _run(helm.Lint(config).run(str(CHART)))
    assert not [m for m in json.dumps(result).split('"') if m.startswith("[ERROR]")], result


def _objects(manifest: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {key(o): o for o in yaml.safe_load_all(manifest) if o}


@pytest.mark.parametrize("choice", sorted(CHOICES))
def test_helm_installs_what_kustomize_builds(choice: str, helm_config: Any) -> None:
    release = _run(helm.Install(helm_config).run(RELEASE, str(CHART), values=CHOICES[choice], create_namespace=True,
                                                 wait=False))
    installed = _objects(release["manifest"])
    # The chart rolls its agents by a checksum of the settings, kustomize by the ConfigMap's hashed name: the
    # rest is the same, object by object.
    for rolled in ROLLED:  # the agents and the fleet controller
        template = installed[rolled]["spec"]["template"]["metadata"]
        assert set(template["annotations"]) == {CHECKSUM} and len(template.pop("annotations")[CHECKSUM]) == 64
    shipped = [*unhashed(kustomize(choice)), *kustomize(DASHBOARD)]  # the chart ships the dashboard too
    built = {k: o for k, o in ((key(o), o) for o in shipped) if k[0] != "Namespace"}
    assert sorted(installed) == sorted(built)
    for k, obj in built.items():
        assert installed[k] == obj, k


DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(("values", "image"), [
    ({}, "ghcr.io/topolink/topolink:0.1.0"),
    ({"image": {"tag": "0.2.0"}}, "ghcr.io/topolink/topolink:0.2.0"),
    ({"image": {"repository": "registry.example/topolink", "digest": DIGEST}}, f"registry.example/topolink@{DIGEST}"),
    ({"image": {"tag": "0.2.0", "digest": DIGEST}}, f"ghcr.io/topolink/topolink@{DIGEST}"),
])
def test_the_image_is_pinned_by_digest_or_tag(values: dict[str, Any], image: str, helm_config: Any) -> None:
    """``image.digest`` pins every container of the DaemonSet (the uninstall hook's Job is rendered from the same
    image template: tests/test_apiserver_uninstall_hook.py runs it) to those bytes."""
    release = _run(helm.Install(helm_config).run(RELEASE, str(CHART), values={**values, **NO_HOOK},
                                                 create_namespace=True, wait=False))
    pods = [o["spec"]["template"]["spec"] for o in yaml.safe_load_all(release["manifest"]) if o
            and o["kind"] in ("DaemonSet", "Job")]
    images = {c["image"] for spec in pods for c in [*spec["containers"], *spec.get("initContainers", [])]}
    assert images == {image}


def test_a_digest_that_is_not_one_is_refused(helm_config: Any) -> None:
    with pytest.raises(helm.HelmError, match="digest"):
        _run(helm.Install(helm_config).run(RELEASE, str(CHART), values={"image": {"digest": "latest"}, **NO_HOOK},
                                           create_namespace=True, wait=False))


def test_upgrade_rollback_and_uninstall(helm_config: Any, chart_apiserver: ApiServer) -> None:
    api = chart_apiserver.admin()
    daemonset = f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/topolink"

    def image() -> str:
        obj = api.get(daemonset).raise_for_status().json()
        return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])

    _run(helm.Install(helm_config).run(RELEASE, str(CHART), values=NO_HOOK, create_namespace=True, wait=False))
    assert image() == "ghcr.io/topolink/topolink:0.1.0"
    _run(helm.Upgrade(helm_config).run(RELEASE, str(CHART), values={"image": {"tag": "0.1.1"}, **NO_HOOK},
                                                 wait=False))
    assert image() == "ghcr.io/topolink/topolink:0.1.1"
    # Back to revision 1's values. helm-sdkpy's Rollback (0.1.32) cannot pass Helm 4 the wait strategy its
    # rollback requires ("wait strategy not set"), so the roll back is what `helm rollback` does in effect: a
    # new revision with the old values. The CLI's `helm rollback topolink 1 --wait=watcher` is the same.
    _run(helm.Upgrade(helm_config).run(RELEASE, str(CHART), values={"image": {"tag": ""}, **NO_HOOK}, wait=False))
    assert image() == "ghcr.io/topolink/topolink:0.1.0"
    assert [r["version"] for r in _run(helm.History(helm_config).run(RELEASE))] == [1, 2, 3]
    _run(helm.Uninstall(helm_config).run(RELEASE, wait=True))
    for path in (daemonset, f"/api/v1/namespaces/{NAMESPACE}/configmaps/topolink-agent",
                 "/apis/rbac.authorization.k8s.io/v1/clusterroles/topolink-resource-slices",
                 "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/topolink-agent-own-node"):
        assert api.get(path).status_code == 404, path


def test_a_value_outside_the_schema_is_refused(helm_config: Any) -> None:
    with pytest.raises(helm.HelmError, match="labelsVia"):
        _run(helm.Install(helm_config).run(RELEASE, str(CHART), values={"settings": {"labelsVia": "nodes"}},
                                           create_namespace=True, wait=False))
