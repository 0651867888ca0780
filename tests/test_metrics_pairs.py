"""The pair families of ``/metrics`` (GPU pairs, GPU x RDMA NIC pairs, NUMA distances): built and rendered once
per snapshot and format, not per view; published whole while their series are within the limit, else none of
them and nothing about pairs worked out for the scrape. Counted, not timed (benchmarks/limits.py times them)."""

from __future__ import annotations

import argparse
import gzip
from collections.abc import Callable

import pytest

import topology as t
from exporter import View
from exporter._metrics import _exposition, _metrics
from exporter._metrics._exposition import MetricsCache
from exporter._metrics._families import PAIRS
from exporter._metrics._metrics import PAIR_SERIES_LIMIT, pair_series
from tests.serve_machines import discover_profile


@pytest.fixture(scope="module")
def hgx(tmp_path_factory: pytest.TempPathFactory) -> t.Snapshot:
    return discover_profile("hgx-h100", tmp_path_factory.mktemp("hgx"))[0]


def _series(body: bytes) -> dict[str, int]:
    """Samples per metric name (the part of a sample line before its labels or value)."""
    out: dict[str, int] = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            out[name] = out.get(name, 0) + 1
    return out


def _withheld(body: bytes) -> float:
    line = next(x for x in body.decode().splitlines() if x.startswith("topolink_metrics_pair_series_withheld "))
    return float(line.split()[1])


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    calls = [0]
    real: Callable[..., object] = getattr(module, name)

    def counted(*args: object) -> object:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_pair_series_is_what_the_pair_families_hold_when_every_fact_is_read(hgx: t.Snapshot) -> None:
    body = MetricsCache(lambda: View(snapshot=hgx, generation=1)).body(openmetrics=False, gzipped=False)
    held = _series(body)
    assert sum(n for name, n in held.items() if name in PAIRS) == pair_series(hgx) == 8 * 7 + 2 * 2 + 4 * 8 * 8
    assert held["topolink_gpu_pair_nvlinks"] == 28 and held["topolink_gpu_nic_gpudirect_verdict"] == 64
    assert _withheld(body) == 0


@pytest.mark.parametrize("limit", [0, 1, "one below"])
def test_above_the_limit_no_pair_family_is_published_and_no_pair_is_worked_out(
        hgx: t.Snapshot, monkeypatch: pytest.MonkeyPatch, limit: int | str) -> None:
    most = pair_series(hgx) - 1 if limit == "one below" else int(limit)
    snap = t.replace(hgx)  # a snapshot of its own: nothing derived from it is kept yet
    worked = [_counting(monkeypatch, _metrics, name) for name in ("gpu_pair_rows", "gpu_nic_rows", "pair_families")]
    for openmetrics in (False, True):
        body = MetricsCache(lambda: View(snapshot=snap, generation=1), pair_limit=most).body(
            openmetrics=openmetrics, gzipped=True)
        plain = gzip.decompress(body)
        assert not PAIRS & {line.split(" ")[2] for line in plain.decode().splitlines() if line.startswith("# TYPE")}
        assert _withheld(plain) == pair_series(hgx)  # whole families or none: never some pairs of them
        assert _series(plain)["topolink_gpu_info"] == 8
    assert [w[0] for w in worked] == [0, 0, 0]


def test_pair_families_are_rendered_once_per_snapshot_and_format_whatever_the_views(
        hgx: t.Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe pass or a sink's publish makes a new view around the same snapshot: its own families are built
    and rendered again, the pairs are not."""
    snap = t.replace(hgx)
    pairs = _counting(monkeypatch, _exposition, "pair_families")
    own = _counting(monkeypatch, _exposition, "view_families")
    bodies = []
    for generation in (1, 2, 3):
        view = View(snapshot=snap, generation=generation, discovery_passes=generation)
        cache = MetricsCache(lambda: view)  # noqa: B023  (used within this iteration)
        for openmetrics in (False, True):
            for gzipped in (True, False, True):
                bodies.append(body := cache.body(openmetrics=openmetrics, gzipped=gzipped))
                plain = gzip.decompress(body) if gzipped else body
                assert f"topolink_discovery_passes_total {generation:.1f}".encode() in plain
                assert _series(plain)["topolink_gpu_pair_pcie_path"] == 28
    assert pairs[0] == 2, pairs  # one per format, for the three views
    assert own[0] == 3, own  # one per view, for both formats
    unread = (t.Fact(subject=snap.gpus[0].id, aspect=t.Aspect.NVLINKS),)
    body = MetricsCache(lambda: View(snapshot=snap, generation=4, unread=unread)).body(openmetrics=False,
                                                                                    gzipped=False)
    assert pairs[0] == 3 and _series(body)["topolink_gpu_pair_nvlinks"] == 21  # another set of facts unread


def test_the_default_limit_is_the_flag_s_and_the_agent_s() -> None:
    from agent.cli import serve as serve_cli
    from agent.serve import ServeConfig

    def parse(environ: dict[str, str], *argv: str) -> int:
        parser = argparse.ArgumentParser()
        serve_cli.add_parsers(parser.add_subparsers(), lambda p: None, environ=environ)
        return int(parser.parse_args(["serve", *argv]).metrics_pair_series_limit)

    assert parse({}) == ServeConfig().metrics_pair_series_limit == PAIR_SERIES_LIMIT
    assert parse({}, "--metrics-pair-series-limit", "0") == 0
    assert parse({"TOPOLINK_METRICS_PAIR_SERIES_LIMIT": "123"}) == 123
    with pytest.raises(SystemExit):
        parse({}, "--metrics-pair-series-limit", "-1")


def test_the_default_publishes_every_pair_up_to_the_nic_limit_and_none_at_256_gpus() -> None:
    """The bounds at the limits' shapes (benchmarks/limits.py's snapshots): 8 GPUs with 1,024 NICs and 4 NUMA
    nodes; 256 GPUs with 128 NICs and 64 NUMA nodes."""
    def bound(g: int, n: int, u: int) -> int:
        return g * (g - 1) + u * u + 4 * g * n

    assert bound(8, t.SNAPSHOT_LIMITS["nics"], 4) <= PAIR_SERIES_LIMIT < bound(t.SNAPSHOT_LIMITS["gpus"], 128, 64)
