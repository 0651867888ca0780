"""``GET /v1/placement`` and the page's new parts, through the ASGI app: the same document as ``topolink place``,
400 with a reason for a bad question, one search per snapshot and question; the page's GPUs grouped by
socket and switch with their NVLink island, the pair heat map and the best groups, for 8 GPUs and for 72,
checked in the real browser (screenshots kept in tests/artifacts)."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import topology as t
from exporter import HttpConfig, MetricsCache, PlacementQuery, View, create_app, placement_answer
from exporter._placement import _placement_api as api
from tests.placement_support import nvl72
from tests.serve_machines import discover_profile
from tests.test_serve import png_is_blank

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


def client(view: View) -> TestClient:
    return TestClient(create_app(lambda: view, MetricsCache(lambda: view), HttpConfig()), follow_redirects=False)


def copy(a: str, b: str, gbs: float) -> t.Measurement:
    return t.Measurement(test="device_to_device_memcpy_write_ce", subjects=(a, b), direction="a->b",
                         value=gbs * 1e9, unit="bytes_per_second", source=t.Source.MEASURED, method="ce-write",
                         size_bytes=512 << 20)


@pytest.fixture(scope="module")
def hgx(tmp_path_factory: pytest.TempPathFactory) -> t.Snapshot:
    """The HGX H100 profile with GPU0's copies to GPU1..7 measured: 390 GB/s (0.87 of 450), GPU0 to GPU3 at
    150 GB/s (a slow pair: 0.33)."""
    snap = discover_profile("hgx-h100", tmp_path_factory.mktemp("hgx"))[0]
    g = [x.id for x in snap.gpus]
    return t.with_measurements(snap, [copy(g[0], g[k], 150.0 if k == 3 else 390.0) for k in range(1, 8)])


class Elements(HTMLParser):
    """Counts elements by tag and class, and keeps the rows of ``table.heat``."""

    def __init__(self) -> None:
        super().__init__()
        self.classes: Counter[str] = Counter()
        self.heat_rows: list[list[dict[str, str]]] = []
        self._in_heat = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        for c in a.get("class", "").split():
            self.classes[f"{tag}.{c}"] += 1
        if tag == "table":
            self._in_heat = "heat" in a.get("class", "")
        elif self._in_heat and tag == "tr":
            self.heat_rows.append([])
        elif self._in_heat and tag in ("td", "th"):
            self.heat_rows[-1].append(a)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_heat = False


def parse(html: str) -> Elements:
    found = Elements()
    found.feed(html)
    return found


def test_the_endpoint_answers_what_place_answers(hgx: t.Snapshot) -> None:
    view = View(snapshot=hgx, generation=1)
    r = client(view).get("/v1/placement?gpus=4&size=256MiB&top=2")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    want = placement_answer(hgx, PlacementQuery(gpus=4, size_bytes=256 << 20, top=2), api.SERVED_BUSY)
    assert r.json() == want
    assert r.json()["source"] == "estimate" and not r.json()["busy"]["known"]
    head = client(view).head("/v1/placement?gpus=4")
    assert head.status_code == 200 and head.content == b""


@pytest.mark.parametrize(("query", "words"), [
    ("", "gpus is required"), ("?gpus=four", "whole number"), ("?gpus=2&size=lots", "size 'lots'"),
    ("?gpus=2&exclude=42", "no GPU 42"), ("?gpus=2&top=0", "top 0"), ("?gpus=2&colour=red", "unknown parameter"),
    ("?gpus=2&collective=broadcast", "collective 'broadcast'")])
def test_a_bad_question_gets_400_with_the_reason(hgx: t.Snapshot, query: str, words: str) -> None:
    r = client(View(snapshot=hgx, generation=1)).get("/v1/placement" + query)
    assert r.status_code == 400 and words in r.json()["detail"]


def test_more_gpus_than_the_node_has_is_an_answer_with_no_group(hgx: t.Snapshot) -> None:
    doc = client(View(snapshot=hgx, generation=1)).get("/v1/placement?gpus=9").json()
    assert doc["groups"] == [] and doc["note"] == "8 GPUs available, 9 asked for"


def test_one_search_per_snapshot_and_question(hgx: t.Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    real = api.placement_answer

    def counting(snap: t.Snapshot, query: PlacementQuery, busy: Any) -> dict[str, Any]:
        asked.append(query.gpus)
        return real(snap, query, busy)

    monkeypatch.setattr(api, "placement_answer", counting)
    views = [View(snapshot=hgx, generation=1)]
    app = create_app(lambda: views[-1], MetricsCache(lambda: views[-1]), HttpConfig())
    c = TestClient(app)
    for _ in range(3):
        assert c.get("/v1/placement?gpus=4").status_code == 200
    assert c.get("/v1/placement?gpus=2").status_code == 200
    assert asked == [4, 2]
    views.append(View(snapshot=hgx, generation=2))  # a new snapshot: answers again
    assert c.get("/v1/placement?gpus=4").status_code == 200 and asked == [4, 2, 4]
    c.get("/")
    assert asked == [4, 2, 4, 2, 8]  # the page's 2, 4 and 8 (4 was cached)


def test_a_search_that_cannot_get_its_turn_is_503(hgx: t.Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "WAIT_S", 0.05)
    cache = api.PlacementCache()
    cache._search.acquire()
    try:
        with pytest.raises(api.Busy):
            cache.answer(View(snapshot=hgx, generation=1), PlacementQuery(gpus=2))
    finally:
        cache._search.release()


def _page(snap: t.Snapshot) -> str:
    r = client(View(snapshot=snap, generation=1)).get("/")
    assert r.status_code == 200
    html = r.text
    assert "<script" not in html and "<link" not in html and "src=" not in html and "url(" not in html
    return html


def test_the_page_for_8_gpus(hgx: t.Snapshot) -> None:
    html = _page(hgx)
    found = parse(html)
    assert found.classes["div.gpu"] == 8 and found.classes["div.sock"] == 2  # two sockets
    assert found.classes["div.sw"] == 9  # a PCIe switch above each GPU (its NICs with it), one for the NVSwitches
    assert found.classes["div.nic"] == 8 and found.classes["div.nvs"] == 4
    assert "NVLink island A: 8 GPUs, through 4 NVSwitches" in html
    rows = found.heat_rows
    assert len(rows) == 9 and all(len(r) == 9 for r in rows)
    gpu0 = rows[1][1:]
    assert [c.get("class", "").split()[0] for c in gpu0] == ["self", "full", "full", "low", "full", "full", "full",
                                                              "full"]
    assert "measured 150.0 GB/s (device_to_device_memcpy_write_ce) of 450.0 theoretical, ratio 0.33" in gpu0[3]["title"]
    assert all(c["class"].startswith("s") for c in rows[2][1:] if "self" not in c["class"])  # GPU1: never measured
    assert "not measured; theoretical 450.0 GB/s" in rows[2][3]["title"]
    for size, gpus in (("2", "GPU0, GPU1"), ("4", "GPU0, GPU1, GPU2, GPU3")):
        assert f"<tr><td>{size}</td><td>{gpus}</td>" in html
    assert "<tr><td>8</td><td>GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU7</td>" in html
    assert "Best GPU groups (estimates)" in html and "never measurements" in html
    if shutil.which("dot"):
        assert "<details><summary>PCIe tree (Graphviz)</summary>" in html and "<svg" in html


def test_the_page_for_72_gpus() -> None:
    snap = nvl72()
    html = _page(snap)
    found = parse(html)
    assert found.classes["div.gpu"] == 72 and found.classes["div.sock"] == 36
    assert "NVLink island A: 72 GPUs, through 18 NVSwitches" in html
    assert found.classes["table.big"] == 1 and len(found.heat_rows) == 73
    assert all(len(r) == 73 for r in found.heat_rows)
    assert {c["class"] for r in found.heat_rows[1:] for c in r[1:] if c.get("class") != "self"} == {"s6"}
    assert "<tr><td>8</td>" in html and "<tr><td>4</td>" in html and "<tr><td>2</td>" in html
    assert len(html) < 1_000_000


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium is not installed")
@pytest.mark.parametrize("size", [8, 72])
def test_a_real_browser_draws_the_page(hgx: t.Snapshot, size: int, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    rack = nvl72()
    tray = [g.id for g in rack.gpus[:4]]  # one tray's pairs measured, one of them slow
    rack = t.with_measurements(rack, [copy(a, b, 300.0 if (a, b) == (tray[0], tray[3]) else 760.0)
                                      for a in tray for b in tray if a != b])
    page.write_text(_page(hgx if size == 8 else rack))
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"placement-page-{size}.png"
    base = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1800"]
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=90,
                         check=False).stdout
    assert dom.count('class="gpu') == size and f"GPU{size - 1}" in dom
    subprocess.run([*base, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=90, check=False)
    assert shot.exists() and not png_is_blank(shot.read_bytes()), f"blank screenshot: {shot}"
    print(f"screenshot kept at {shot}")


def test_the_readme_screenshot_shows_a_real_build(tmp_path: Path) -> None:
    """The page the README's picture is taken of (tests.docs_support screenshot) carries the structure hash and
    the installed version, as the agent serves them, never an empty hash or 0+unknown."""
    from agent.cli._common import version
    from tests.docs_support import screenshot_view

    view = screenshot_view(tmp_path)
    text = client(view).get("/").text
    assert view.structure_hash and f"structure hash <code>{view.structure_hash[:16]}</code>" in text
    assert view.version == version() != "0+unknown" and f"topolink {view.version}." in text
