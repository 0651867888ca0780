"""`topolink serve` /metrics beside Debian's prometheus-node-exporter, on loopback. Prints a table.

    .venv/bin/python benchmarks/serve.py [--scrapes 10000] [--idle-seconds 60]

topolink serves the hgx-h100 profile with a full set of probe results (every CUDA copy, latency and
all-reduce result a node would have; synthetic, marked source=simulated) loaded from its state directory.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
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
            time.sleep(0.2)
    raise SystemExit(f"nothing answered on 127.0.0.1:{port}{path}")


def scrape(port: int, n: int) -> tuple[list[float], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    times, body = [], b""
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("GET", "/metrics")
        body = conn.getresponse().read()
        times.append(time.perf_counter() - t0)
    return times, body


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(name: str, pid: int, port: int, scrapes: int, idle_s: float) -> dict[str, str]:
    times, body = scrape(port, scrapes)
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    rss = rss_mb(pid)
    c0 = cpu_seconds(pid)
    time.sleep(idle_s)
    idle = (cpu_seconds(pid) - c0) / idle_s * 100
    q = statistics.quantiles(times, n=100)
    return {"exporter": name, "p50 ms": f"{q[49] * 1e3:.2f}", "p99 ms": f"{q[98] * 1e3:.2f}", "series": str(series),
            "bytes": str(len(body)), f"RSS MB after {scrapes}": f"{rss:.1f}",
            f"idle CPU % ({idle_s:g} s)": f"{idle:.2f}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scrapes", type=int, default=10_000)
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    args = ap.parse_args()
    rows = []
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
            rows[-1]["cupy/torch loaded"] = "yes" if ("cupy" in maps or "torch" in maps) else "no"
        finally:
            serve.terminate()
            serve.wait(timeout=10)
        exe = shutil.which("prometheus-node-exporter")
        if exe:
            port = free_port()
            ne = subprocess.Popen([exe, f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
            try:
                wait_up(port, "/metrics")
                rows.append(measure("prometheus-node-exporter", ne.pid, port, args.scrapes, args.idle_seconds))
                rows[-1]["cupy/torch loaded"] = "-"
            finally:
                ne.terminate()
                ne.wait(timeout=10)
    keys = list(rows[0])
    widths = [max(len(k), *(len(r.get(k, "")) for r in rows)) for k in keys]
    print(" | ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)))
    print("-|-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(r.get(k, "").ljust(w) for k, w in zip(keys, widths, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
