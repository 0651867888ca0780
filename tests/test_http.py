"""The HTTP API in process (httpx through the ASGI app): routes, HEAD, negotiation, gzip, ETags, readiness,
the probe endpoint, 4xx. The server's own limits (timeouts, the connection cap, 431) are in test_http_abuse.py."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import topology as t
from exporter import HttpConfig, MetricsCache, View, create_app, picture_dot, render_svg
from exporter._http._negotiate import accepts_gzip, etag_matches
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
    assert r.headers["vary"] == "Accept, Accept-Encoding"


def test_metrics_gzip_when_asked(hgx: t.Snapshot) -> None:
    c = client(View(snapshot=hgx, generation=1))
    plain = c.get("/metrics", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    for asked in ("gzip", "deflate, gzip;q=0.5", "*", "x-gzip"):
        r = c.get("/metrics", headers={"Accept-Encoding": asked})
        assert r.headers["content-encoding"] == "gzip", asked
        assert int(r.headers["content-length"]) < len(plain.content) / 5 and r.content == plain.content
    assert "content-encoding" not in c.get("/metrics", headers={"Accept-Encoding": "gzip;q=0"}).headers
    om = c.get("/metrics", headers={"Accept": "application/openmetrics-text", "Accept-Encoding": "gzip"})
    assert om.headers["content-encoding"] == "gzip" and om.content.endswith(b"# EOF\n")


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz", "/v1/topology", "/v1/topology/matrix",
                                  "/v1/topology.dot", "/"])
def test_head_on_every_get_route(hgx: t.Snapshot, path: str) -> None:
    c = client(View(snapshot=hgx, generation=1))
    got, head = c.get(path), c.head(path)
    assert head.status_code == got.status_code == 200
    assert head.content == b"" and head.headers["content-length"] == got.headers["content-length"]
    assert head.headers["content-type"] == got.headers["content-type"]


def test_topology_json_etag_and_304(hgx: t.Snapshot) -> None:
    c = client(View(snapshot=hgx, generation=1))
    r = c.get("/v1/topology")
    assert r.status_code == 200 and t.from_dict(r.json()).gpus == hgx.gpus
    etag = r.headers["etag"]
    assert c.get("/v1/topology", headers={"If-None-Match": etag}).status_code == 304
    assert c.get("/v1/topology", headers={"If-None-Match": '"other"'}).status_code == 200
    assert c.get("/v1/topology", headers={"If-None-Match": f'"a", W/{etag}'}).status_code == 304  # weak compare
    assert c.head("/v1/topology", headers={"If-None-Match": "*"}).status_code == 304


def test_if_none_match_compares_weakly_and_reads_a_list_by_tags() -> None:
    ours = '"abc"'
    assert etag_matches('"abc"', ours) and etag_matches('W/"abc"', ours) and etag_matches(" * ", ours)
    assert etag_matches('"x,y", W/"abc"', ours)  # a comma inside a tag is part of the tag
    assert etag_matches(' , "q" ,, "abc" ', ours)  # empty list elements are allowed
    assert not etag_matches('"abcd"', ours) and not etag_matches('"ab', ours) and not etag_matches("abc", ours)
    assert not etag_matches(None, ours) and not etag_matches("", ours)


def test_accept_encoding_weights() -> None:
    assert accepts_gzip("gzip") and accepts_gzip("GZIP;q=0.1") and accepts_gzip("br, *;q=0.5")
    assert not accepts_gzip(None) and not accepts_gzip("identity") and not accepts_gzip("gzip;q=0")
    assert not accepts_gzip("*;q=0") and not accepts_gzip("gzip;q=zero") and not accepts_gzip("*, gzip;q=0")


def test_readyz_names_each_degradation_and_stays_ready(hgx: t.Snapshot) -> None:
    why = "state directory /x not writable (Permission denied): lost at the next restart"
    r = client(View(snapshot=hgx, generation=1, state_writable=False, degradations=(why,))).get("/readyz")
    assert r.status_code == 200 and r.text == f"ready (degraded)\ndegraded: {why}\n"
    assert client(View(snapshot=hgx, generation=1)).get("/readyz").text == "ready\n"


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


def test_the_picture_leaves_out_the_distances_graphviz_cannot_lay_out(tmp_path: Path) -> None:
    """A GB200 tray has 34 NUMA nodes, 32 of them GPU memory without CPUs: their complete graph of distances
    (561 edges) kept Graphviz busy for 9 s to 55 s. The picture draws the distance between the two NUMA nodes
    with CPUs and says what it left out; benchmarks/pages.py times every machine's picture."""
    snap = discover_profile("gb200-tray", tmp_path)[0]
    dot = picture_dot(snap)
    with_cpus = [n for n in snap.numa_nodes if n.cpus]
    assert len(snap.numa_nodes) == 34 and len(with_cpus) == 2
    assert sum("style=dashed" in line for line in dot.splitlines()) == 1
    assert "NUMA distances of the 32 NUMA nodes without CPUs (device memory) not drawn" in dot
    if shutil.which("dot"):
        assert render_svg(dot, timeout_s=30).svg is not None


def test_routing_as_the_framework_answered(hgx: t.Snapshot) -> None:
    """The plain ASGI app keeps the framing the routes had under Starlette: 405 with Allow, a HEAD of an unknown
    path 404 without a body, one path segment for a probe id, the last value of a repeated query parameter."""
    c = client(View(snapshot=hgx, generation=1), token="s3cret", probes=Probes())
    wrong = c.put("/metrics")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, HEAD" and wrong.text == "Method Not Allowed"
    assert c.get("/v1/probe").headers["allow"] == "POST"
    missing = c.head("/nope")
    assert missing.status_code == 404 and missing.content == b"" and missing.headers["content-length"] == "9"
    assert c.get("/v1/probe/run1/more").status_code == 404 and c.get("/v1/probe/").status_code == 404
    assert c.get("/healthz").headers["content-type"] == "text/plain; charset=utf-8"
    assert c.get("/").headers["content-type"] == "text/html; charset=utf-8"
    two = c.get("/v1/placement?gpus=9&gpus=2")
    assert two.status_code == 200 and two.headers["content-type"] == "application/json"
    assert [len(g["gpus"]) for g in two.json()["groups"]][:1] == [2]


def test_a_bug_in_a_route_is_a_500_and_reaches_the_server(hgx: t.Snapshot) -> None:
    def broken() -> View:
        raise RuntimeError("a bug")

    app = create_app(broken, MetricsCache(lambda: None), HttpConfig())
    assert TestClient(app, raise_server_exceptions=False).get("/readyz").status_code == 500
    with pytest.raises(RuntimeError, match="a bug"):
        TestClient(app).get("/readyz")
