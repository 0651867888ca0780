"""`topolink serve` /metrics beside Debian's prometheus-node-exporter, on loopback; then /metrics with and
without slow clients holding connections; then, when asked, a memory soak. Prints tables.

    .venv/bin/python benchmarks/serve.py [--scrapes 10000] [--idle-seconds 60]
        [--slow-clients 1000] [--slow-seconds 30] [--slow-rounds 2] [--soak-seconds 0] [--soak-every 60]

topolink serves the hgx-h100 profile with a full set of probe results (every CUDA copy, latency and
all-reduce result a node would have; synthetic, marked source=simulated) loaded from its state directory.

- Exporters: ``--scrapes`` back-to-back scrapes on one keep-alive connection, plain text; resident size after
  them and CPU while idle for ``--idle-seconds``. Beside them, the floor under serve's size: an interpreter
  that imports only the libraries serve runs on (``LIBRARIES``: asyncio, uvicorn's server and h11 protocol,
  prometheus-client, pynvml) and nothing of topolink's, and its ratio to node_exporter's size in the same run.
- Slow clients: p50/p99/max of /metrics (gzip asked, as Prometheus does, a scrape every 1 ms on one
  keep-alive connection) for ``--slow-seconds`` with no other client, then as long again with
  ``--slow-clients`` connections that never finish a request (half send nothing, half a byte a second);
  the server closes them at its header timeout or evicts them at its cap, and the pool (a process of its
  own) opens them again. ``--slow-rounds`` alternations of the two, so that drift on a shared machine shows.
- Soak (``--soak-seconds`` > 0): one gzip scrape a second, a discovery pass a minute; the resident size every
  ``--soak-every`` seconds, its least-squares slope over the whole soak and over its second half.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._serve_load import (  # noqa: E402
    Scraper,
    SlowClients,
    cpu_seconds,
    open_file_room,
    quantiles_ms,
    rss_mib,
    slope_mib_per_hour,
)
from tests.serve_machines import discover_profile, full_measurements  # noqa: E402
from topology import to_dict  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(port: int, path: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"nothing answered on 127.0.0.1:{port}{path}")


def measure(name: str, pid: int, port: int, scrapes: int, idle_s: float) -> dict[str, str]:
    s = Scraper(port)
    times, body = [], b""
    for _ in range(scrapes):
        elapsed, body = s.once()
        times.append(elapsed)
    zipped = Scraper(port, gzip=True).once()[1]
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    rss = rss_mib(pid)
    c0 = cpu_seconds(pid)
    time.sleep(idle_s)
    idle = (cpu_seconds(pid) - c0) / idle_s * 100
    p50, p99, _ = quantiles_ms(times)
    return {"exporter": name, "p50 ms": f"{p50:.2f}", "p99 ms": f"{p99:.2f}", "series": str(series),
            "bytes": str(len(body)), "gzip bytes": str(len(zipped)), f"RSS MiB after {scrapes}": f"{rss:.1f}",
            f"idle CPU % ({idle_s:g} s)": f"{idle:.2f}"}


# What serve's HTTP server, metrics and NVML access rest on: imported alone, they are the floor of serve's size.
LIBRARIES = ("asyncio", "uvicorn.config", "uvicorn.server", "uvicorn.protocols.http.h11_impl", "prometheus_client",
             "prometheus_client.openmetrics.exposition", "pynvml")


def library_floor() -> float:
    """The resident size (MiB) of an interpreter (``-I``, as serve's own) with only ``LIBRARIES`` imported."""
    code = f"import {', '.join(LIBRARIES)}, sys; print(flush=True); sys.stdin.read()"
    proc = subprocess.Popen([sys.executable, "-I", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        return rss_mib(proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def print_table(rows: list[dict[str, str]]) -> None:
    keys = list(rows[0])
    widths = [max(len(k), *(len(r.get(k, "")) for r in rows)) for k in keys]
    print(" | ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)))
    print("-|-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(r.get(k, "").ljust(w) for k, w in zip(keys, widths, strict=True)))
    print()


def closed_counters(port: int) -> str:
    body = Scraper(port).once()[1].decode()
    found = re.findall(r'^topolink_http_connections_closed_total\{reason="(\w+)"\} ([\d.e+]+)$', body, re.M)
    return ", ".join(f"{reason} {float(n):.0f}" for reason, n in found)


def slow_clients(pid: int, port: int, n: int, seconds: float, rounds: int) -> list[dict[str, str]]:
    room = open_file_room(n + 256) - 128
    if room < n:
        print(f"(only {room} slow clients: this process's open-file limit allows no more)")
        n = room
    rows = []
    for clients in (0, n) * rounds:
        pool = SlowClients(port, clients)
        pool.start()
        pool.wait_ready()  # all connected before timing starts
        times = Scraper(port, gzip=True).for_seconds(seconds, pause_s=0.001)
        pool.stop.set()
        pool.join(10)
        p50, p99, worst = quantiles_ms(times)
        rows.append({"slow clients": str(clients), "held at the end": str(pool.connected),
                     "reopened": str(pool.reopened), "scrapes": str(len(times)), "p50 ms": f"{p50:.2f}",
                     "p99 ms": f"{p99:.2f}", "max ms": f"{worst:.2f}", "RSS MiB": f"{rss_mib(pid):.1f}",
                     "closed by the server (cumulative)": closed_counters(port)})
    return rows


def soak(pid: int, port: int, seconds: float, every: float) -> None:
    scraper = Scraper(port, gzip=True)
    t0 = time.monotonic()
    samples: list[tuple[float, float]] = [(0.0, rss_mib(pid))]
    next_sample = every
    print(f"{'minute':>8}  {'RSS MiB':>7}")
    print(f"{0.0:8.2f}  {samples[0][1]:7.1f}")
    while (now := time.monotonic() - t0) < seconds:
        scraper.once()
        if now >= next_sample:
            samples.append((now, rss_mib(pid)))
            print(f"{now / 60:8.2f}  {samples[-1][1]:7.1f}", flush=True)
            next_sample += every
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0 - now)))
    samples.append((time.monotonic() - t0, rss_mib(pid)))
    half = [s for s in samples if s[0] >= seconds / 2]
    steady = statistics.median(s[1] for s in half)
    print(f"\nsoak {seconds:g} s, one scrape a second (measured): RSS start {samples[0][1]:.1f} MiB, "
          f"end {samples[-1][1]:.1f} MiB, max {max(s[1] for s in samples):.1f} MiB, median of the second half "
          f"{steady:.1f} MiB; slope {slope_mib_per_hour(samples):+.2f} MiB/h over the soak, "
          f"{slope_mib_per_hour(half):+.2f} MiB/h over its second half")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scrapes", type=int, default=10_000)
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--slow-clients", type=int, default=1000)
    ap.add_argument("--slow-seconds", type=float, default=30.0)
    ap.add_argument("--slow-rounds", type=int, default=2)
    ap.add_argument("--soak-seconds", type=float, default=0.0)
    ap.add_argument("--soak-every", type=float, default=60.0)
    args = ap.parse_args()
    rows: list[dict[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="topolink-bench-") as tmp:
        work = Path(tmp)
        snap, node = discover_profile("hgx-h100", work)
        state = work / "state"
        state.mkdir()
        doc = {"schema": "topolink.probe/v1", "profile": "quick", "backend": "cuda", "outcomes": [],
               "snapshot": to_dict(full_measurements(snap))}
        (state / "probe-report.json").write_text(json.dumps(doc))
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | node.env()
        serve = subprocess.Popen([sys.executable, "-m", "agent.cli.serve", "--host", "127.0.0.1", "--port", str(port),
                                  "--state-dir", str(state), "--probe-interval", "0"], cwd=REPO, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_up(port, "/readyz")
            rows.append(measure("topolink serve (hgx-h100)", serve.pid, port, args.scrapes, args.idle_seconds))
            maps = Path(f"/proc/{serve.pid}/maps").read_text()
            rows[-1]["cupy/torch/pydantic loaded"] = "yes" if any(m in maps for m in ("cupy", "torch", "pydantic")) \
                else "no"
            exe = shutil.which("prometheus-node-exporter")
            if exe:
                ne_port = free_port()
                ne = subprocess.Popen([exe, f"--web.listen-address=127.0.0.1:{ne_port}"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
                try:
                    wait_up(ne_port, "/metrics")
                    rows.append(measure("prometheus-node-exporter", ne.pid, ne_port, args.scrapes, args.idle_seconds))
                    rows[-1]["cupy/torch/pydantic loaded"] = "-"
                finally:
                    ne.terminate()
                    ne.wait(timeout=10)
            print_table(rows)
            if exe:
                key = f"RSS MiB after {args.scrapes}"
                floor, node_exporter = library_floor(), float(rows[-1][key])
                serve_rss = float(rows[0][key])
                print(f"serve {serve_rss:.1f} MiB = {serve_rss / node_exporter:.2f}x node_exporter's "
                      f"{node_exporter:.1f} MiB; the libraries it runs on, imported alone "
                      f"({', '.join(LIBRARIES)}): {floor:.1f} MiB = "
                      f"{floor / node_exporter:.2f}x, leaving {1.5 * node_exporter - floor:.1f} MiB for all of "
                      f"topolink's code and data within 1.5x\n")
            if args.slow_clients > 0:
                print_table(slow_clients(serve.pid, port, args.slow_clients, args.slow_seconds, args.slow_rounds))
            if args.soak_seconds > 0:
                soak(serve.pid, port, args.soak_seconds, args.soak_every)
        finally:
            serve.terminate()
            serve.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
