"""The Prometheus exposition: families from the view, bounded cardinality, promtool-clean, cached."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

import topology as t
from exporter import FAMILIES, MetricsCache, ProbeStats, SinkStats, View, metrics_markdown, series_bound
from tests.serve_machines import discover_profile, full_measurements

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(scope="module")
def hgx(tmp_path_factory: pytest.TempPathFactory) -> t.Snapshot:
    return discover_profile("hgx-h100", tmp_path_factory.mktemp("hgx"))[0]


def render(view: View) -> str:
    return MetricsCache(lambda: view).exposition().text.decode()


def samples(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{") or line.startswith(name + " ")]


def value_samples(text: str, name: str) -> list[Sample]:
    return [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]


def test_every_family_is_described_and_exported(hgx: t.Snapshot) -> None:
    text = render(View(snapshot=hgx, generation=1))
    for f in FAMILIES:
        assert f"# TYPE {f.exposed.removesuffix('_total')} " in text or f"# TYPE {f.exposed} " in text, f.name


def test_gpu_count_nvlinks_paths_and_numa(hgx: t.Snapshot) -> None:
    text = render(View(snapshot=hgx, generation=1))
    assert len(samples(text, "topolink_gpu_info")) == 8
    nvlinks = samples(text, "topolink_gpu_nvlinks")
    assert len(nvlinks) == 8 and all(line.endswith(" 18.0") for line in nvlinks)
    pairs = samples(text, "topolink_gpu_pair_path_info")
    assert len(pairs) == 28 and all('path="NV18"' in line for line in pairs)
    assert 'topolink_nvlink_island_gpus{island="0"} 8.0' in text
    assert len(samples(text, "topolink_numa_distance")) == 4
    assert 'topolink_snapshot_complete 1.0' in text
    assert not samples(text, "topolink_degraded_info")


def test_measured_theoretical_and_ratio(hgx: t.Snapshot) -> None:
    m = t.Measurement(test="device_to_device_memcpy_read_ce", subjects=(hgx.gpus[0].id, hgx.gpus[1].id),
                      direction="a->b", value=360e9, unit="bytes_per_second", source=t.Source.MEASURED,
                      method="ce-read", backend="cuda")
    view = View(snapshot=t.with_measurements(hgx, [m]), theoretical=(450e9,), generation=1)
    text = render(view)
    assert len(samples(text, "topolink_bandwidth_bytes_per_second")) == 2
    values = {s.labels["source"]: s.value for s in value_samples(text, "topolink_bandwidth_bytes_per_second")}
    assert values == {"measured": 360e9, "theoretical": 450e9}
    assert [s.value for s in value_samples(text, "topolink_bandwidth_measured_ratio")] == [0.8]


def test_degraded_nvlink_and_pcie_width(hgx: t.Snapshot) -> None:
    gpu = hgx.gpus[2]
    one = next(lk for lk in hgx.links if lk.kind is t.LinkKind.NVLINK and gpu.id in (lk.a, lk.b))
    links = tuple(lk for lk in hgx.links if lk != one)
    narrow = t.PcieLinkState(current_gen=5, current_width=8, max_gen=5, max_width=16)
    pci = tuple(dataclasses.replace(f, link=narrow) if f.id == gpu.id else f for f in hgx.pci)
    text = render(View(snapshot=dataclasses.replace(hgx, links=links, pci=pci), generation=1))
    bad = samples(text, "topolink_degraded_info")
    assert any('kind="nvlink-down"' in b and gpu.id in b for b in bad)
    assert any('kind="pcie-width"' in b and 'reason="x8 of x16"' in b for b in bad)


def test_agent_counters_and_stale_facts(hgx: t.Snapshot) -> None:
    fact = t.Fact(subject=hgx.gpus[0].id, aspect=t.Aspect.NVLINKS)
    view = View(snapshot=hgx, generation=1, stale_since=((fact, 1000.0),), discovery_passes=3,
                probes=ProbeStats(runs=(("host_memcpy", "ok", 2),), last_success=(("host_memcpy", 99.0),),
                                  busy_seconds=1.5, duty_cycle=0.004),
                sinks=(SinkStats(name="labels", written=3, unchanged=1),), state_errors=(("snapshot", 1),))
    text = render(view)
    assert f'topolink_fact_unknown_since_timestamp_seconds{{aspect="nvlinks",subject="{fact.subject}"}} 1000.0' \
        in text
    assert 'topolink_probe_runs_total{status="ok",test="host_memcpy"} 2.0' in text
    assert "topolink_probe_duty_cycle_ratio 0.004" in text
    assert 'topolink_sink_publish_total{result="written",sink="labels"} 3.0' in text
    assert 'topolink_state_file_errors_total{file="snapshot"} 1.0' in text
    assert "topolink_discovery_passes_total 3.0" in text


def test_exposition_is_rendered_once_per_view_and_not_on_the_global_registry(hgx: t.Snapshot) -> None:
    views = [View(snapshot=hgx, generation=1)]
    cache = MetricsCache(lambda: views[-1])
    first = cache.exposition()
    assert cache.exposition() is first
    views.append(dataclasses.replace(views[0], discovery_passes=5, generation=2))
    assert cache.exposition() is not first and b"topolink_discovery_passes_total 5.0" in cache.exposition().text
    assert b"# EOF" in first.openmetrics
    assert not any(n.startswith("topolink") for n in prometheus_client.REGISTRY._names_to_collectors)
    assert MetricsCache(lambda: None).exposition().text == b""


@pytest.mark.parametrize("profile", ["hgx-h100", "dgx-a100"])
def test_cardinality_within_the_documented_bound(profile: str, tmp_path: Path) -> None:
    snap = full_measurements(discover_profile(profile, tmp_path)[0])
    unknown = [t.Fact(subject=g.id, aspect=a) for g in snap.gpus for a in (t.Aspect.NVLINKS, t.Aspect.NUMA)]
    tests = {m.test for m in snap.measurements}
    view = View(snapshot=snap, generation=1, theoretical=tuple(400e9 for _ in snap.measurements),
                stale_since=tuple((f, 1.0) for f in unknown),
                probes=ProbeStats(runs=tuple((x, s, 1) for x in tests for s in ("ok", "waived", "failed", "busy")),
                                  last_success=tuple((x, 1.0) for x in tests)))
    text = render(view)
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    bound = series_bound(gpus=len(snap.gpus), nics=sum(n.rdma for n in snap.nics), numa=len(snap.numa_nodes),
                         sources=len(snap.sources), links=len(snap.links), measurements=len(snap.measurements),
                         tests=len(tests), unknown=len(unknown), sinks=0)
    assert series <= bound, (series, bound)
    assert series > 0.5 * bound  # the bound is tight enough to plan with
    # 72 GPUs (an NVL72 rack's worth on one node, the design's ceiling), 18 NICs: still bounded.
    assert series_bound(gpus=72, nics=18, numa=4, sources=6, links=200, measurements=0, tests=12, unknown=0,
                        sinks=4) < 20_000


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian prometheus) is not installed")
def test_promtool_check_metrics_is_clean(tmp_path: Path) -> None:
    snap = full_measurements(discover_profile("hgx-h100", tmp_path)[0])
    view = View(snapshot=snap, generation=1, theoretical=tuple(400e9 for _ in snap.measurements),
                probes=ProbeStats(runs=(("host_memcpy", "ok", 1),)), sinks=(SinkStats(name="x"),))
    out = subprocess.run(["promtool", "check", "metrics"], input=render(view), capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out.stdout + out.stderr


def test_readme_metric_table_is_generated_from_the_code() -> None:
    text = README.read_text()
    found = re.search(r"<!-- metrics:begin -->\n(.*?)<!-- metrics:end -->", text, re.S)
    assert found, "README has no generated metric table (topolink serve --print-metrics)"
    assert found.group(1) == metrics_markdown()
