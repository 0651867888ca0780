"""Label churn and API traffic across a fleet: prints a table against the targets. Not a test.

    .venv/bin/python benchmarks/fleet.py [--nodes 10000] [--days 30] [--sample 8] [--sample-days 3]
                                         [--traffic-passes 30] [--watch-seconds 15]

Fleet pass: every node, hourly, measures its three bandwidth ratios with +/-5% uniform noise around a
per-node base (a fifth of the nodes sit right on a class edge) and labels them with the real
``classify`` hysteresis, reading back its previous value; 1% of the nodes lose half of one rate at a
random hour (a real degradation; those already in the lowest class are left out: no label can move).
Sample pass: a few nodes of four machine profiles go through the whole
sink (``NodeLabelSink``: ``desired_labels`` -> ``plan_node_labels`` -> apply) against an in-memory API that
counts reads and writes, with noisy measurements as probe results and a PCIe link trained to x8 halfway.
Traffic: bytes read per node per day from the sizes of real responses of a real kube-apiserver (with
``$KUBEBUILDER_ASSETS``; see ``benchmarks/_kube_traffic.py``), against listing every topolink slice of the
fleet each pass.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import topology as t  # noqa: E402
from exporter._core._health import EDGES, BwKind, classify  # noqa: E402
from exporter.kube import LabelConfig, NodeLabelSink, NodeView  # noqa: E402
from topology import replace  # noqa: E402

PROFILES = ("hgx-h100", "dgx-a100", "a30-4x-nvlink-pairs", "rtx4090-8x")
KINDS = tuple(BwKind)


class CountingApi:
    """Just enough of ``KubeApi`` for the label sink: one Node, server-side apply owning the keys sent."""

    def __init__(self, node: str) -> None:
        self.node, self.labels, self.owned = node, {"kubernetes.io/hostname": node}, set[str]()
        self.reads = self.writes = 0

    def get_node(self, name: str) -> NodeView:
        self.reads += 1
        return NodeView(name=name, uid="u", labels=dict(self.labels), owned=frozenset(self.owned),
                        others=frozenset({"kubernetes.io/hostname"}))

    def apply_node_labels(self, name: str, labels: Mapping[str, str]) -> None:
        self.writes += 1
        for key in self.owned - set(labels):
            self.labels.pop(key, None)
        self.labels.update(labels)
        self.owned = set(labels)


def fleet(nodes: int, days: int, rng: random.Random) -> dict[str, float]:
    hours = days * 24
    base = []
    for i in range(nodes):
        if i % 5 == 0:  # on an edge: the worst case for noise
            base.append([rng.choice(EDGES) * rng.uniform(0.98, 1.02) for _ in KINDS])
        else:
            base.append([rng.uniform(0.78, 0.95) for _ in KINDS])
    inject = {i: (rng.randrange(24, hours), rng.randrange(len(KINDS))) for i in rng.sample(range(nodes), nodes // 100)}
    # a drop inside the lowest class cannot change a label: only drops that cross a class edge are timed
    inject = {i: (at, k) for i, (at, k) in inject.items()
              if classify(base[i][k] * 0.5 * 1.05, None) != classify(base[i][k] * 0.95, None)}
    noise_changes = 0
    delays: list[int] = []
    for i in range(nodes):
        labels = [classify(b * rng.uniform(0.95, 1.05), None) for b in base[i]]
        at, kind = inject.get(i, (None, None))
        shown: int | None = None
        rand, bases = rng.random, base[i]
        for h in range(1, hours):
            for k in range(3):
                ratio = bases[k] * (0.95 + 0.1 * rand())
                if at is not None and h >= at and k == kind:
                    ratio *= 0.5
                new = classify(ratio, labels[k])
                if new != labels[k]:
                    if at is not None and h >= at and k == kind:
                        shown = shown if shown is not None else h - at + 1
                    else:
                        noise_changes += 1
                    labels[k] = new
        if at is not None:
            delays.append(shown if shown is not None else hours)
    return {"changes_per_day": noise_changes / days, "changes_per_node_day": noise_changes / days / nodes,
            "max_delay": max(delays, default=0), "median_delay": sorted(delays)[len(delays) // 2] if delays else 0,
            "first_pass": sum(d == 1 for d in delays), "injected": len(delays)}


def noisy(snap: t.Snapshot, rng: random.Random, ratio: float) -> t.Snapshot:
    cap = t.LinkCapability(snap)
    gpus = [g.id for g in snap.gpus]
    ms = []
    for g in gpus:
        peak = cap.pcie(g)
        if peak:
            ms.append(t.Measurement(test="host_to_device_memcpy_ce", subjects=("numa0", g), direction="a->b",
                                    value=peak * ratio * rng.uniform(0.95, 1.05), unit="bytes_per_second",
                                    source=t.Source.MEASURED, method="ce"))
    for a, b in itertools.pairwise(gpus):
        peak = cap.between(a, b)
        if peak:
            ms.append(t.Measurement(test="device_to_device_memcpy_write_ce", subjects=(a, b), direction="a->b",
                                    value=peak * ratio * rng.uniform(0.95, 1.05), unit="bytes_per_second",
                                    source=t.Source.MEASURED, method="ce-write"))
    return t.with_measurements(snap, tuple(ms))


def narrowed(snap: t.Snapshot) -> t.Snapshot:
    g = snap.gpus[0]
    pcie = replace(g.pcie or t.PcieLinkState(), current_width=8, max_width=16)
    return replace(snap, gpus=(replace(g, pcie=pcie), *snap.gpus[1:]))


def sample(per_profile: int, days: int, rng: random.Random) -> dict[str, float]:
    from tests.kube_support import discover_profile

    hours = days * 24
    writes = reads = passes = 0
    delays = []
    with tempfile.TemporaryDirectory() as tmp:
        snaps = {p: discover_profile(p, Path(tmp) / p) for p in PROFILES}
    for p, snap in snaps.items():
        for n in range(per_profile):
            node = f"{p}-{n}"
            snap_n = replace(snap, node=node)
            api = CountingApi(node)
            sink = NodeLabelSink(api, node, LabelConfig())  # type: ignore[arg-type]
            ratio = EDGES[1] * rng.uniform(0.98, 1.02) if n % 2 else rng.uniform(0.8, 0.9)
            sink.publish(noisy(snap_n, rng, ratio))  # the first write
            before_w, before_r = api.writes, api.reads
            shown = None
            for h in range(1, hours):
                degraded = h >= hours // 2
                sink.publish(noisy(narrowed(snap_n) if degraded else snap_n, rng, ratio))
                passes += 1
                if degraded and shown is None and api.labels.get("gpu.topology/degraded") == "true":
                    shown = h - hours // 2 + 1
            delays.append(shown or hours)
            # steady state: the writes apart from the one the injected degradation causes
            writes += api.writes - before_w - (1 if shown else 0)
            reads += api.reads - before_r
    nodes = len(PROFILES) * per_profile
    return {"writes_per_node_day": writes / nodes / days, "reads_per_pass": reads / passes,
            "max_delay": max(delays), "nodes": nodes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--sample", type=int, default=8, help="nodes per profile through the whole sink")
    ap.add_argument("--sample-days", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--traffic-passes", type=int, default=30, help="steady passes measured against the API server")
    ap.add_argument("--watch-seconds", type=int, default=15, help="server timeout of the watch that is measured")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    f = fleet(args.nodes, args.days, rng)
    t1 = time.perf_counter()
    s = sample(args.sample, args.sample_days, rng)
    t2 = time.perf_counter()
    rows = [
        ("label changes per day from noise (fleet)", f"{f['changes_per_day']:.0f}", "0"),
        (f"passes until a real drop shows, median ({f['injected']:.0f} injected)", f"{f['median_delay']:.0f}", "1"),
        ("  shown on the first pass / worst (a drop landing within the margin of an edge waits for noise)",
         f"{f['first_pass']:.0f}/{f['max_delay']:.0f}", ""),
        (f"passes until a x8 PCIe link shows (worst of {s['nodes']:.0f})", f"{s['max_delay']:.0f}", "1"),
        ("API writes per node per day, steady state (sink)", f"{s['writes_per_node_day']:.2f}", "0"),
        ("API reads per resync (sink)", f"{s['reads_per_pass']:.2f}", "<= 1"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"fleet: {args.nodes} nodes x {args.days} days hourly ({t1 - t0:.0f} s); "
          f"sink: {s['nodes']:.0f} nodes x {args.sample_days} days ({t2 - t1:.0f} s)")
    print(f"{'measure':<{width}}  {'value':>7}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>7}  {target}")
    traffic(args)


def traffic(args: argparse.Namespace) -> None:
    from benchmarks._kube_traffic import measure

    try:
        m = measure(args.traffic_passes, args.watch_seconds, args.nodes)
    except LookupError as exc:
        print(f"\nAPI traffic per node: not measured ({exc})")
        return
    mb = 1e6
    rows = [
        ("steady pass: requests (measured)", f"{m['pass_requests']:.2f}", "1: the Node; slices from the watch"),
        ("steady pass: bytes read (measured)", f"{m['pass_bytes']:.0f}",
         "a Node without kubelet status: real ones are larger"),
        ("steady pass on the wire, TLS included: bytes down (measured)", f"{m['wire_down']:.0f}",
         "passes 6 s apart, the watch's bookmarks included"),
        ("steady pass on the wire, TLS included: bytes up (measured)", f"{m['wire_up']:.0f}", ""),
        ("new connections over those passes (measured)", f"{m['wire_connections']:.0f}",
         "0: one kept-alive connection (the watch has its own)"),
        (f"watch reopened by the server: bytes ({args.watch_seconds} s watch, measured)",
         f"{m['reopen_bytes']:.0f}", ""),
        ("watch bookmark: bytes (measured)", f"{m['bookmark_bytes']:.0f}", ""),
        ("requests per node per day (estimate from the measured)", f"{m['day_requests']:.0f}", ""),
        ("MB read per node per day (estimate from the measured)", f"{m['day_bytes'] / mb:.1f}", ""),
        ("one node's slice list: bytes (measured)", f"{m['slice_list_bytes']:.0f}", ""),
        (f"before (every slice of {args.nodes} nodes each pass): MB per node per day (estimate)",
         f"{m['before_day_bytes'] / mb:.0f}", f"gzip would send {m['gzip_ratio']:.2f} of it"),
    ]
    print(f"\nAPI traffic per node: an 8-GPU H100 node, discovery every 60 s, {args.traffic_passes} passes measured")
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>9}  {note}")


if __name__ == "__main__":
    main()
