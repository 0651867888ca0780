"""`topolink serve` as a process, under faults: a port already in use, a state directory it cannot write,
SIGINT and SIGTERM in the middle of a probe, scrapes all through discovery and probe passes. Real processes on
127.0.0.1 against the hgx-h100 profile; every wait is bounded, every process stopped by its PID."""

from __future__ import annotations

import gzip
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakenvml import materialize
from tests.test_serve import REPO, alive, get, probe_children, start_serve, wait_for

pytestmark = pytest.mark.slow


def ranks_of(pid: int) -> list[int]:
    """The gloo ranks of the probe children of ``pid`` (processes the probe child forked): an item is running."""
    found = []
    children = set(probe_children(pid))
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[-1].split()[1])
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if ppid in children and cmd:
                found.append(int(entry.name))
    return found


def events(log: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.splitlines() if line.startswith("{")]


def test_a_port_in_use_is_one_clear_error_line_and_exit_1(tmp_path: Path) -> None:
    node = materialize("hgx-h100", tmp_path / "machine")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "agent.cli.serve", "--host", "127.0.0.1", "--port", str(port),
                              "--state-dir", str(tmp_path / "state"), "--log-format", "json"], cwd=REPO,
                             env=node.env(), capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 1 and time.monotonic() - t0 < 15
    (err,) = [e for e in events(out.stderr) if e["level"] == "error"]
    assert err["event"] == "http server could not start" and err["address"] == f"127.0.0.1:{port}"
    assert "in use" in str(err["error"])
    assert "discovery pass" not in out.stderr and "signal" not in out.stderr


def test_an_unwritable_state_directory_is_a_metric_and_a_readiness_reason(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory\n")
    state = tmp_path / "a-file" / "state"  # even root cannot create it
    s = start_serve(tmp_path, "--state-dir", str(state), "--probe-interval", "0", "--log-format", "json")
    try:
        wait_for("the state check", lambda: "topolink_state_writable 0.0" in s.metrics(), timeout=20)
        status, body = get(s.url + "/readyz")
        assert status == 200  # still serving true facts: degraded, not unready
        assert body.decode().startswith("ready (degraded)\ndegraded: state directory ") and str(state) in body.decode()
        warned = [e for e in events(s.log_text()) if e["event"] == "state not written"]
        assert len(warned) == 1 and warned[0]["level"] == "warning"  # once, not every pass
        s.proc.send_signal(signal.SIGHUP)
        wait_for("a second pass", lambda: "topolink_discovery_passes_total 2.0" in s.metrics(), timeout=20)
        assert len([e for e in events(s.log_text()) if e["event"] == "state not written"]) == 1
    finally:
        assert s.stop() == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_probe_stops_it_and_says_so(tmp_path: Path, sig: signal.Signals) -> None:
    # On this profile's NUMA node 1 (CPUs this machine lacks) the gloo ranks never meet: the item hangs.
    s = start_serve(tmp_path, "--probe-tests", "all_reduce", "--probe-item-timeout", "60", "--log-format", "json",
                    measure=True)
    wait_for("an item running", lambda: bool(ranks_of(s.proc.pid)), timeout=30, every=0.05)
    children = probe_children(s.proc.pid) + ranks_of(s.proc.pid)
    t0 = time.monotonic()
    s.proc.send_signal(sig)
    assert s.proc.wait(timeout=5) == 0 and time.monotonic() - t0 < 5
    wait_for("probe children gone", lambda: not any(alive(c) for c in children), timeout=3, every=0.05)
    log = s.log_text()
    got = events(log)
    assert {"event": "agent stopping", "signal": sig.name}.items() <= next(
        e for e in got if e["event"] == "agent stopping").items()
    assert any(e["event"] == "probe stopped" and e["reason"] == "the agent is stopping" for e in got)
    assert "out of memory" not in log and not any(e["event"] == "probe failed" for e in got)


def test_scrapes_all_through_discovery_and_probe_passes(tmp_path: Path) -> None:
    """A scraper asks without pause (plain and gzip, in turn) while discovery passes run every second and on
    SIGHUP and a probe pass runs: every answer is whole, and no series comes and goes (apart from the measured
    results the probe adds)."""
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    s = start_serve(tmp_path, "--probe-tests", "host_memcpy", "--probe-interval", "0", "--log-format", "json",
                    "--discovery-interval", "1", "--http-probe-token-file", str(token), measure=True)
    done = threading.Event()
    seen: list[frozenset[tuple[str, tuple[tuple[str, str], ...]]]] = []
    failures: list[str] = []

    def scrape() -> None:
        zipped = False
        while not done.is_set():
            req = urllib.request.Request(s.url + "/metrics", headers={"Accept-Encoding": "gzip"} if zipped else {})
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    body = gzip.decompress(r.read()) if r.headers.get("Content-Encoding") == "gzip" else r.read()
                seen.append(frozenset((x.name, tuple(sorted(x.labels.items())))
                                      for f in text_string_to_metric_families(body.decode()) for x in f.samples
                                      if not x.name.startswith(("topolink_bandwidth", "topolink_probe_last"))))
            except Exception as exc:  # any failure is the finding
                failures.append(f"{type(exc).__name__}: {exc}")
            zipped = not zipped

    scraper = threading.Thread(target=scrape, daemon=True)
    try:
        scraper.start()
        req = urllib.request.Request(s.url + "/v1/probe", method="POST", headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 202
        for _ in range(3):
            s.proc.send_signal(signal.SIGHUP)
            time.sleep(0.3)
        wait_for("the probe pass to end", lambda: "probe pass ended" in s.log_text(), timeout=40)
        wait_for("more passes", lambda: sum(e["event"] == "discovery pass" for e in events(s.log_text())) >= 5,
                 timeout=20)
        wait_for("more than twenty answers", lambda: len(seen) > 20, timeout=60)  # a loaded machine scrapes slower
    finally:
        done.set()
        scraper.join(10)
        assert s.stop() == 0
    assert not failures, failures[:3]
    first = seen[0]
    assert len(seen) > 20 and [sorted(x ^ first) for x in set(seen) if x != first] == []
