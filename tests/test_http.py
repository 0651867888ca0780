"""The HTTP API in process (httpx through the ASGI app): routes, negotiation, ETags, the probe door, 4xx."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import topology as t
from exporter import HttpConfig, MetricsCache, View, create_app
from tests.serve_machines import discover_profile


class Probes:
    def __init__(self) -> None:
        self.running = False

    def start(self) -> str | None:
        if self.running:
            return None
        self.running = True
        return "run1"

    def status(self, run_id: str) -> dict[str, Any] | None:
        return {"id": run_id, "status": "running"} if run_id == "run1" else None


@pytest.fixture(scope="module")
def hgx(tmp_path_factory: pytest.TempPathFactory) -> t.Snapshot:
    return discover_profile("hgx-h100", tmp_path_factory.mktemp("hgx"))[0]


def client(view: View | None, token: str | None = None, probes: Probes | None = None) -> TestClient:
    app = create_app(lambda: view, MetricsCache(lambda: view), HttpConfig(probe_token=token), probes=probes)
    return TestClient(app, follow_redirects=False)


def test_not_ready_before_the_first_snapshot() -> None:
    c = client(None)
    assert c.get("/healthz").status_code == 200
    assert c.get("/readyz").status_code == 503
    assert c.get("/v1/topology").status_code == 503
    assert c.get("/metrics").status_code == 200


def test_metrics_exact_route_and_negotiation(hgx: t.Snapshot) -> None:
    c = client(View(snapshot=hgx, generation=1))
    r = c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "topolink_gpu_info" in r.text
    om = c.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert om.headers["content-type"].startswith("application/openmetrics-text") and om.text.endswith("# EOF\n")
    assert c.get("/metrics", headers={"Accept": "image/png"}).status_code == 406
    assert c.get("/metrics/").status_code == 404  # exact: no redirect either way
    assert c.post("/metrics").status_code == 405


def test_topology_json_etag_and_304(hgx: t.Snapshot) -> None:
    c = client(View(snapshot=hgx, generation=1))
    r = c.get("/v1/topology")
    assert r.status_code == 200 and t.from_dict(r.json()).gpus == hgx.gpus
    etag = r.headers["etag"]
    assert c.get("/v1/topology", headers={"If-None-Match": etag}).status_code == 304
    assert c.get("/v1/topology", headers={"If-None-Match": '"other"'}).status_code == 200


def test_matrix_dot_svg_and_page(hgx: t.Snapshot) -> None:
    c = client(View(snapshot=hgx, generation=1, structure_hash=t.structure_hash(hgx)))
    assert "NV18" in c.get("/v1/topology/matrix").text
    dot = c.get("/v1/topology.dot").text
    assert dot.startswith("graph") and ('label="NV4"' in dot or 'label="NV5"' in dot)
    svg = c.get("/v1/topology.svg")
    if shutil.which("dot"):
        assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml" and b"<svg" in svg.content
    page = c.get("/").text
    assert "GPU and NIC matrix" in page and "NV18" in page
    assert "<script" not in page and "<link" not in page and "src=" not in page  # offline, no JavaScript


def test_svg_without_graphviz_is_503_with_the_reason(hgx: t.Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    r = client(View(snapshot=hgx, generation=1)).get("/v1/topology.svg")
    assert r.status_code == 503 and "graphviz" in r.text.lower()


def test_probe_door_off_by_default_then_token_and_one_at_a_time(hgx: t.Snapshot, tmp_path: Path) -> None:
    view = View(snapshot=hgx, generation=1)
    assert client(view).post("/v1/probe").status_code == 403
    c = client(view, token="s3cret", probes=Probes())
    assert c.post("/v1/probe").status_code == 401
    assert c.post("/v1/probe", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.post("/v1/probe", headers={"Authorization": "Basic s3cret"}).status_code == 401
    assert c.post("/v1/probe", headers={"Authorization": "Bearer s3cr\u00e9t".encode()}).status_code == 401
    ok = c.post("/v1/probe", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 202 and ok.headers["location"] == "/v1/probe/run1"
    assert c.get(ok.json()["status_url"]).json()["status"] == "running"
    assert c.post("/v1/probe", headers={"Authorization": "Bearer s3cret"}).status_code == 409
    assert c.get("/v1/probe/nope").status_code == 404


def test_bad_requests_get_4xx(hgx: t.Snapshot) -> None:
    c = client(View(snapshot=hgx, generation=1))
    assert c.get("/nope").status_code == 404
    assert c.get("/v1/topology", headers={"If-None-Match": "\x7f" * 100}).status_code == 200
    assert c.delete("/v1/topology").status_code == 405
