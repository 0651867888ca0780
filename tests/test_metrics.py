"""The Prometheus exposition: families from the view, stable label sets, counters from zero, one value per
fact, bounded cardinality, promtool-clean, cached, gzipped."""

from __future__ import annotations

import dataclasses
import gzip
import re
import shutil
import subprocess
import zlib
from pathlib import Path

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

import topology as t
from exporter import (
    FAMILIES,
    HttpStats,
    MetricsCache,
    ProbeStats,
    SinkStats,
    View,
    metrics_markdown,
    page,
    series_bound,
)
from tests.docs_support import marked
from tests.serve_machines import discover_profile, full_measurements
from topology import replace


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
    text = MetricsCache(lambda: View(snapshot=hgx, generation=1), HttpStats()).exposition().text.decode()
    for f in FAMILIES:
        assert f"# TYPE {f.exposed.removesuffix('_total')} " in text or f"# TYPE {f.exposed} " in text, f.name


def test_gpu_count_nvlinks_paths_and_numa(hgx: t.Snapshot) -> None:
    text = render(View(snapshot=hgx, generation=1))
    assert len(samples(text, "topolink_gpu_info")) == 8
    nvlinks = samples(text, "topolink_gpu_nvlinks")
    assert len(nvlinks) == 8 and all(line.endswith(" 18.0") for line in nvlinks)
    assert [s.value for s in value_samples(text, "topolink_gpu_pair_nvlinks")] == [18.0] * 28
    assert len(value_samples(text, "topolink_gpu_pair_pcie_path")) == 28
    assert 'topolink_nvlink_island_gpus{island="0"} 8.0' in text
    assert {s.value for s in value_samples(text, "topolink_gpu_nvlink_island")} == {0.0}
    assert len(samples(text, "topolink_numa_distance")) == 4
    assert 'topolink_snapshot_complete 1.0' in text
    degraded = value_samples(text, "topolink_degraded")
    assert len(degraded) == 3 * 8 + sum(n.rdma for n in hgx.nics) and all(s.value == 0 for s in degraded)


def test_states_are_values_and_label_sets_do_not_change_with_them(hgx: t.Snapshot) -> None:
    """A source that fails, a GPUDirect verdict that changes, a link that degrades: values move, the set of
    series (names and label sets) stays the same."""
    def keys(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
        return {(s.name, tuple(sorted(s.labels.items()))) for f in text_string_to_metric_families(text)
                for s in f.samples if not s.name.startswith("topolink_snapshot")}

    before = render(View(snapshot=hgx, generation=1))
    failed = tuple(replace(o, status=t.SourceStatus.FAILED) if o.name == "nvml" else o
                   for o in hgx.sources)
    gpu = hgx.gpus[0]
    narrow = replace(gpu, pcie=t.PcieLinkState(current_gen=5, current_width=8, max_gen=5, max_width=16))
    changed = replace(hgx, sources=failed, gpus=(narrow, *hgx.gpus[1:]))
    after = render(View(snapshot=changed, generation=2))
    assert keys(before) == keys(after)
    status = {s.labels["source"]: s.value for s in value_samples(after, "topolink_source_status")}
    up = {s.labels["source"]: s.value for s in value_samples(after, "topolink_source_up")}
    assert (status["nvml"], up["nvml"], status["pci"], up["pci"]) == (4.0, 0.0, 0.0, 1.0)
    width = {s.labels["kind"]: s.value for s in value_samples(after, "topolink_degraded")
             if s.labels["subject"] == gpu.id}
    assert width == {"pcie-width": 1.0, "nvlink-down": 0.0, "pcie-slow": 0.0}


def test_one_value_per_fact_the_gpus_own_pcie_link(hgx: t.Snapshot) -> None:
    """sysfs reads the GPU's link as x8, NVML as x16: discovery keeps NVML's on the GPU, and every metric and
    the page say x16 (no degradation), never the function's sysfs copy."""
    gpu = hgx.gpus[0]
    x8 = t.PcieLinkState(current_gen=5, current_width=8, max_gen=5, max_width=16)
    pci = tuple(replace(f, link=x8) if f.id == gpu.id else f for f in hgx.pci)
    snap = replace(hgx, pci=pci)
    text = render(View(snapshot=snap, generation=1))
    width = {s.labels["state"]: s.value for s in value_samples(text, "topolink_gpu_pcie_link_width")
             if s.labels["gpu"] == gpu.id}
    assert width == {"current": 16.0, "max": 16.0}
    assert all(s.value == 0 for s in value_samples(text, "topolink_degraded") if s.labels["subject"] == gpu.id)
    assert "x8 of x16" not in page(View(snapshot=snap, generation=1), now=0, svg=None, svg_reason="",
                                   measured_matrix="")


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


@pytest.mark.parametrize("profile", ["quick", "full", ""])
def test_a_figure_says_its_profile_and_only_full_is_compared(hgx: t.Snapshot, profile: str) -> None:
    """quick reads below full on fast links: its figure is exported, labelled quick, with the links'
    theoretical rate beside it, but no ratio to it (no alert as if it were full's)."""
    m = t.Measurement(test="device_to_device_memcpy_read_ce", subjects=(hgx.gpus[0].id, hgx.gpus[1].id),
                      direction="a->b", value=360e9, unit="bytes_per_second", source=t.Source.MEASURED,
                      method="ce-read", backend="cuda", conditions=(("profile", profile),) if profile else ())
    text = render(View(snapshot=t.with_measurements(hgx, [m]), theoretical=(450e9,), generation=1))
    assert {s.labels["profile"] for s in value_samples(text, "topolink_bandwidth_bytes_per_second")} == {profile}
    ratio = value_samples(text, "topolink_bandwidth_measured_ratio")
    assert [s.value for s in ratio] == ([] if profile == "quick" else [0.8])


def test_degraded_nvlink_and_pcie_width(hgx: t.Snapshot) -> None:
    gpu = hgx.gpus[2]
    one = next(lk for lk in hgx.links if lk.kind is t.LinkKind.NVLINK and gpu.id in (lk.a, lk.b))
    links = tuple(lk for lk in hgx.links if lk != one)
    narrow = t.PcieLinkState(current_gen=5, current_width=8, max_gen=5, max_width=16)
    gpus = tuple(replace(g, pcie=narrow) if g.id == gpu.id else g for g in hgx.gpus)
    view = View(snapshot=replace(hgx, links=links, gpus=gpus), generation=1)
    bad = {(s.labels["subject"], s.labels["kind"]) for s in value_samples(render(view), "topolink_degraded")
           if s.value == 1}
    assert bad == {(gpu.id, "nvlink-down"), (gpu.id, "pcie-width")}
    shown = page(view, now=0, svg=None, svg_reason="", measured_matrix="")
    assert "x8 of x16" in shown and "nvlink-down" in shown


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
    assert 'topolink_probe_runs_total{status="failed",test="host_memcpy"} 0.0' in text
    assert "topolink_probe_duty_cycle_ratio 0.004" in text
    assert 'topolink_sink_publish_total{result="written",sink="labels"} 3.0' in text
    assert 'topolink_state_file_errors_total{file="snapshot"} 1.0' in text
    assert "topolink_discovery_passes_total 3.0" in text


def test_every_counter_is_there_at_zero_from_the_first_scrape(hgx: t.Snapshot) -> None:
    view = View(snapshot=hgx, generation=1, probes=ProbeStats(tests=("host_memcpy", "all_reduce")),
                sinks=(SinkStats(name="node-labels"),), state_errors=(("probe-report.json", 0), ("snapshot.json", 0)))
    text = MetricsCache(lambda: view, HttpStats()).exposition().text.decode()
    counters = {(s.name, tuple(sorted(s.labels.values()))): s.value for f in text_string_to_metric_families(text)
                if f.type == "counter" for s in f.samples if s.name.endswith("_total")}
    for test in ("host_memcpy", "all_reduce"):
        for status in ("ok", "waived", "failed", "busy"):
            assert counters[("topolink_probe_runs_total", tuple(sorted((status, test))))] == 0
    for result in ("written", "unchanged", "failed"):
        assert counters[("topolink_sink_publish_total", tuple(sorted(("node-labels", result))))] == 0
    for name in ("probe-report.json", "snapshot.json"):
        assert counters[("topolink_state_file_errors_total", (name,))] == 0
    for reason in ("header_timeout", "evicted", "refused", "header_too_large"):
        assert counters[("topolink_http_connections_closed_total", (reason,))] == 0


def test_exposition_is_rendered_once_per_view_and_not_on_the_global_registry(hgx: t.Snapshot) -> None:
    views = [View(snapshot=hgx, generation=1)]
    stats = HttpStats()
    cache = MetricsCache(lambda: views[-1], stats)
    first = cache.body(openmetrics=False, gzipped=False)
    assert cache._part(False).raw is cache._part(False).raw  # one rendering per view
    assert cache._cached is not None and set(cache._cached.parts) == {False}  # a scrape renders its format alone
    assert cache._part(True).raw is cache._part(True).raw and cache._cached.metrics == []  # both done: dropped
    views.append(dataclasses.replace(views[0], discovery_passes=5, generation=2))
    assert b"topolink_discovery_passes_total 5.0" in cache.exposition().text
    stats.count("evicted")  # live counters move between views, without a new view
    assert b'topolink_http_connections_closed_total{reason="evicted"} 1.0' in cache.exposition().text
    assert b"topolink_discovery_passes_total" in first
    assert cache.exposition().openmetrics.endswith(b"# EOF\n") and cache.exposition().openmetrics.count(b"# EOF") == 1
    assert not any(n.startswith("topolink") for n in prometheus_client.REGISTRY._names_to_collectors)
    assert MetricsCache(lambda: None).exposition().text == b""


@pytest.mark.parametrize("openmetrics", [False, True])
def test_gzip_is_one_stream_of_the_same_bytes_as_live_counters_move(hgx: t.Snapshot, openmetrics: bool) -> None:
    stats = HttpStats()
    cache = MetricsCache(lambda: View(snapshot=hgx, generation=1), stats)
    for _ in range(3):
        zipped = cache.body(openmetrics=openmetrics, gzipped=True)
        plain = cache.body(openmetrics=openmetrics, gzipped=False)
        assert gzip.decompress(zipped) == plain and len(zipped) < len(plain) / 5
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        assert d.decompress(zipped) == plain and d.eof and not d.unused_data  # one member, nothing after it
        stats.count("header_timeout")


@pytest.mark.parametrize("profile", ["hgx-h100", "dgx-a100"])
def test_cardinality_within_the_documented_bound(profile: str, tmp_path: Path) -> None:
    snap = full_measurements(discover_profile(profile, tmp_path)[0])
    unknown = [t.Fact(subject=g.id, aspect=a) for g in snap.gpus for a in (t.Aspect.NVLINKS, t.Aspect.NUMA)]
    tests = {m.test for m in snap.measurements}
    view = View(snapshot=snap, generation=1, theoretical=tuple(400e9 for _ in snap.measurements),
                stale_since=tuple((f, 1.0) for f in unknown),
                probes=ProbeStats(runs=tuple((x, s, 1) for x in tests for s in ("ok", "waived", "failed", "busy")),
                                  last_success=tuple((x, 1.0) for x in tests)))
    text = MetricsCache(lambda: view, HttpStats()).exposition().text.decode()
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
                probes=ProbeStats(runs=(("host_memcpy", "ok", 1),)), sinks=(SinkStats(name="x"),),
                state_writable=False)
    text = MetricsCache(lambda: view, HttpStats()).exposition().text.decode()
    assert "topolink_http_connections_closed_total" in text and "topolink_state_writable 0.0" in text
    out = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out.stdout + out.stderr


def test_the_documented_metric_table_is_generated_from_the_code() -> None:
    path, section = marked("metrics")
    assert section == metrics_markdown(), f"{path}: python -m tests.docs_support (or topolink serve --print-metrics)"


def test_openmetrics_is_rendered_unescaped_as_every_name_is_legacy(hgx: t.Snapshot) -> None:
    """The OpenMetrics body asks for no name escaping (``allow-utf-8``; the default, ``underscores``, rewrites each
    sample's name a character at a time: most of a 256-GPU scrape). That is the same text only while every
    metric and label name is in the legacy character set: each is held to it, and the bytes to the default's."""
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

    from exporter._metrics._metrics import families

    view = View(snapshot=full_measurements(hgx), generation=1)
    built = list(families(view))
    legacy = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
    assert [(s.name, k) for f in built for s in f.samples for k in ("", *s.labels)
            if not legacy.fullmatch(k or s.name)] == []
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(type("Built", (), {"collect": staticmethod(lambda: built)})())
    assert MetricsCache(lambda: view).body(openmetrics=True, gzipped=False) == openmetrics(registry)  # type: ignore[no-untyped-call]
