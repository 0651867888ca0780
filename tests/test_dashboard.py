"""The Grafana dashboard (daemonset/dashboard/topolink.json) on a real Prometheus (Debian's ``prometheus``)
scraping two real agents (``topolink serve`` on two test machine profiles: an HGX H100 and a box of NVLink
pairs): every panel's query parses and runs, and returns series from this healthy fleet, unless the panel's
description says it shows trouble only (then it returns none here) or needs probe results (the agents serve
machine profiles, where probes never run: none here, and its query reads a probe-result family). The node
variable lists both nodes. Shipped by the chart (tests/test_chart.py) and by overlays/grafana."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.apiserver import free_port
from tests.apiserver_agent import wait_until
from tests.chart_support import kustomize

REPO = Path(__file__).resolve().parents[1]
DASHBOARD = json.loads((REPO / "daemonset/dashboard/topolink.json").read_text())
NODES = {"dash-hgx": "hgx-h100", "dash-pairs": "a6000-8x-nvlink-pairs"}
TROUBLE, PROBES = "Trouble only", "After the first probe pass"
PROBE_RESULTS = ("topolink_bandwidth_", "topolink_latency_seconds", "topolink_probe_last_success_timestamp_seconds")


def panels() -> list[dict[str, Any]]:
    return [p for p in DASHBOARD["panels"] if p["type"] != "row"]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus not found: scripts/test.sh installs the prometheus package (Debian's)")
    tmp = tmp_path_factory.mktemp("dashboard")
    agents, targets = [], []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG"))}
    for node, profile in NODES.items():
        port = free_port()
        targets.append(f"127.0.0.1:{port}")
        agents.append(subprocess.Popen(
            [sys.executable, "-m", "tests.fakenvml", "run", profile, "--", sys.executable, "-m", "agent.cli", "serve",
             "--host", "127.0.0.1", "--port", str(port), "--state-dir", str(tmp / node), "--probe-interval", "0",
             "--node-name", node], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    config = tmp / "prometheus.yml"
    config.write_text(json.dumps({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                                  "scrape_configs": [{"job_name": "topolink",
                                                      "static_configs": [{"targets": targets}]}]}))
    port = free_port()
    server = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                               f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            def scraped() -> bool:
                try:  # a Prometheus still starting answers 503 "Service Unavailable" as text: not ready yet
                    if http.get("/-/ready").status_code != 200:
                        return False
                    got = query(http, "count(count_over_time(topolink_snapshot_info[30s]) >= 5)")
                except httpx.HTTPError:
                    return False
                return bool(got) and got[0]["value"][1] == str(len(NODES))
            wait_until("both agents scraped five times", scraped, timeout=180)
            yield http
    finally:
        for proc in [server, *agents]:
            proc.send_signal(signal.SIGTERM)
        for proc in [server, *agents]:
            proc.wait(timeout=30)


def query(http: httpx.Client, expr: str) -> list[dict[str, Any]]:
    resp = http.get("/api/v1/query", params={"query": expr})
    body = resp.json()
    assert resp.status_code == 200 and body["status"] == "success", (expr, body)
    return list(body["data"]["result"])


def _expr(text: str, node: str) -> str:
    return text.replace("$node", node).replace("$__rate_interval", "30s")


def test_the_dashboard_has_a_fleet_and_a_node_view() -> None:
    rows = [p["title"] for p in DASHBOARD["panels"] if p["type"] == "row"]
    assert rows[0] == "Fleet" and rows[1].startswith("One node")
    assert {p["title"] for p in panels()} >= {"Nodes below their peers' median", "Degraded devices and reasons",
                                               "Probe freshness", "Publishing errors", "Measured over theoretical"}
    (node,) = [v for v in DASHBOARD["templating"]["list"] if v["name"] == "node"]
    assert node["query"]["query"] == "label_values(topolink_snapshot_info, node)"


@pytest.mark.parametrize("panel", panels(), ids=[p["title"] for p in panels()])
def test_every_panel_query_runs_on_a_healthy_fleet(panel: dict[str, Any], prometheus: httpx.Client) -> None:
    trouble, probes = TROUBLE in panel["description"], PROBES in panel["description"]
    for target in panel["targets"]:
        if probes:
            assert any(f in target["expr"] for f in PROBE_RESULTS), target["expr"]
        for node in NODES if "$node" in target["expr"] else [next(iter(NODES))]:
            result = query(prometheus, _expr(target["expr"], node))
            if trouble or probes:
                assert result == [], (panel["title"], result)
            else:
                assert result, (panel["title"], node, target["expr"])
                if "$node" in target["expr"]:
                    assert {r["metric"].get("node") for r in result} == {node}


def test_the_node_variable_lists_every_node(prometheus: httpx.Client) -> None:
    values = prometheus.get("/api/v1/label/node/values", params={"match[]": "topolink_snapshot_info"}).json()
    assert set(values["data"]) == set(NODES)


def test_every_legend_names_labels_its_query_keeps(prometheus: httpx.Client) -> None:
    """A legend ``{{label}}`` the result does not carry would print empty."""
    for panel in panels():
        if TROUBLE in panel["description"] or PROBES in panel["description"]:
            continue
        for target in panel["targets"]:
            result = query(prometheus, _expr(target["expr"], next(iter(NODES))))
            for label in re.findall(r"{{(\w+)}}", target["legendFormat"]):
                assert all(label in r["metric"] for r in result), (panel["title"], label)


def test_the_overlay_ships_it_for_the_sidecar() -> None:
    (config_map,) = [o for o in kustomize("grafana") if o["metadata"]["name"] == "topolink-dashboard"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["topolink.json"]) == DASHBOARD
