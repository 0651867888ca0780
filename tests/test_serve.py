"""`topolink serve` as a process against the hgx-h100 profile, with real parts: a Prometheus server
scraping it, a headless Chromium loading its page, and faults while it serves (NVML errors on the next
pass, a corrupt state file, 200 concurrent scrapers). All on 127.0.0.1, every wait bounded, every process
stopped by its PID."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakenvml import FakeNode, load_machine, materialize, nvml_lines, profile_path
from tests.tcp_relay import Recorder

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "tests" / "artifacts"
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], bool], timeout: float = 30.0, every: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def get(url: str, timeout: float = 10.0, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    url: str
    node: FakeNode
    state: Path
    log: Path

    def metrics(self) -> str:
        return get(self.url + "/metrics")[1].decode()

    def log_text(self) -> str:
        return self.log.read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("serve did not exit within 5 s of SIGTERM") from None
        return self.proc.returncode


def start_serve(workdir: Path, *args: str, profile: str = "hgx-h100", measure: bool = False) -> Served:
    """``serve`` on a machine profile; ``measure`` lifts its fixture guard (``tests.serve_measuring``) for the
    tests of the probe machinery, which would otherwise run no probe on a profile."""
    node = materialize(profile, workdir / "machine")
    state = workdir / "state"
    state.mkdir(exist_ok=True)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_")} | node.env()
    log = workdir / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tests.serve_measuring" if measure else "agent.cli.serve",
                                 "--host", "127.0.0.1", "--port", str(port),
                                 "--state-dir", str(state), "--probe-backend", "cpu", "--probe-profile", "selftest",
                                 *args], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    served = Served(proc, f"http://127.0.0.1:{port}", node, state, log)
    try:
        wait_for("readyz", lambda: get(served.url + "/readyz", timeout=2)[0] == 200)
    except AssertionError:
        served.stop()
        raise AssertionError(log.read_text()) from None
    return served


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    work = tmp_path_factory.mktemp("serve")
    (work / "state").mkdir()
    (work / "state" / "snapshot.json").write_text('{"schema": "topolink.topology/v2", "node": [')  # corrupt
    s = start_serve(work, "--probe-tests", "host_memcpy", "--discovery-interval", "600", "--log-format", "json",
                    measure=True)
    wait_for("a measured host copy", lambda: 'source="measured"' in s.metrics(), timeout=40)
    yield s
    assert s.stop() == 0


def test_corrupt_state_file_is_reported_and_ignored(served: Served) -> None:
    assert 'topolink_state_file_errors_total{file="snapshot.json"} 1.0' in served.metrics()
    events = [json.loads(line) for line in served.log_text().splitlines() if line.startswith("{")]
    assert any(e["event"] == "state file ignored" and e["file"] == "snapshot.json" for e in events)
    # The report is served as soon as the pass ends and written to the state directory right after.
    wait_for("the probe report in the state directory", (served.state / "probe-report.json").exists, timeout=10)


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="Debian prometheus is not installed")
def test_a_real_prometheus_reads_gpus_nvlinks_and_a_measured_bandwidth(served: Served, tmp_path: Path) -> None:
    """Prometheus scrapes through a relay that shows it asked for gzip and got it, then PromQL reads back."""
    port = free_port()
    relay = Recorder(served.url.removeprefix("http://"))
    target = relay.address
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs:\n  - job_name: topolink\n    static_configs: [{{targets: ['{target}']}}]\n")
    prom = subprocess.Popen(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def query(q: str) -> list[dict[str, object]]:
        status, body = get(f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q}), timeout=5)
        assert status == 200, f"prometheus answered {status}: {body[:200]!r}"
        result: list[dict[str, object]] = json.loads(body)["data"]["result"]
        return result

    try:
        # Prometheus answers 503 until its TSDB is open; only then are queries meaningful.
        wait_for("prometheus to be ready", lambda: get(f"http://127.0.0.1:{port}/-/ready", timeout=5)[0] == 200,
                 timeout=60)
        wait_for("prometheus to scrape topolink", lambda: bool(query('up{job="topolink"} == 1')), timeout=40)
        assert query("count(topolink_gpu_info)")[0]["value"][1] == "8"  # type: ignore[index]
        assert query("sum(topolink_gpu_nvlinks)")[0]["value"][1] == "144"  # type: ignore[index]
        assert query("count(topolink_gpu_pair_nvlinks == 18)")[0]["value"][1] == "28"  # type: ignore[index]
        assert query("count(topolink_degraded == 0)")[0]["value"][1] == str(3 * 8 + 8)  # type: ignore[index]
        measured = query('topolink_bandwidth_bytes_per_second{source="measured",test="host_memcpy"}')
        assert measured and float(measured[0]["value"][1]) > 1e8  # type: ignore[index]
        assert b"accept-encoding: gzip" in relay.asked.lower()
        assert b"content-encoding: gzip" in relay.answered.lower()
        assert b"topolink_gpu_info" not in relay.answered  # compressed on the wire
    finally:
        relay.close()
        prom.terminate()
        try:
            prom.wait(timeout=10)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait()


def png_is_blank(png: bytes) -> bool:
    """True when every pixel has the same value (decoded with zlib; no imaging library needed)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    width = height = 0
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", data[:8])
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    raw = zlib.decompress(idat)
    assert width > 100 and height > 100
    return len(set(raw)) <= 2


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium is not installed")
def test_a_real_browser_renders_the_page_and_the_picture(served: Served, tmp_path: Path) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "serve-page.png"
    base = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,2400"]
    dom = subprocess.run([*base, "--dump-dom", served.url + "/"], capture_output=True, text=True, timeout=90,
                         check=False).stdout
    assert "GPU and NIC matrix" in dom and "NV18" in dom and "host_memcpy" in dom
    assert "<svg" in dom and "GPU7" in dom  # the picture is inline
    subprocess.run([*base, f"--screenshot={shot}", served.url + "/"], capture_output=True, timeout=90, check=False)
    assert shot.exists() and not png_is_blank(shot.read_bytes()), f"blank screenshot: {shot}"
    svg_dom = subprocess.run([*base, "--dump-dom", served.url + "/v1/topology.svg"], capture_output=True,
                             text=True, timeout=90, check=False).stdout
    assert "GPU0" in svg_dom and "NVSwitch" in svg_dom
    print(f"screenshot kept at {shot}")


def test_200_concurrent_scrapers(served: Served) -> None:
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(lambda _: get(served.url + "/metrics", timeout=20), range(200)))
    assert all(status == 200 and b"topolink_gpu_info" in body for status, body in results)
    assert time.monotonic() - t0 < 30
    assert get(served.url + "/readyz")[0] == 200


def test_huge_header_and_bad_accept_get_4xx(served: Served) -> None:
    assert get(served.url + "/metrics", headers={"Accept": "image/png"})[0] == 406
    assert get(served.url + "/metrics", headers={"X-Big": "a" * 64_000})[0] == 431
    assert get(served.url + "/readyz")[0] == 200


def test_nvml_errors_on_the_next_pass_serve_the_last_known_facts_marked_stale(served: Served) -> None:
    gpu1 = "0000:2a:00.0"
    assert f'topolink_gpu_nvlinks{{gpu="{gpu1}"}} 18.0' in served.metrics()
    machine = load_machine(profile_path("hgx-h100"), {"inject": [
        {"call": "nvmlDeviceGetNvLinkState", "gpu": 1, "error": "UNKNOWN"}]})
    served.node.nvml_profile.write_text("\n".join(nvml_lines(machine)) + "\n")
    served.proc.send_signal(signal.SIGHUP)
    wait_for("an incomplete pass", lambda: "topolink_snapshot_complete 0.0" in served.metrics(), timeout=20)
    text = served.metrics()
    assert f'topolink_fact_unknown_since_timestamp_seconds{{aspect="nvlinks",subject="{gpu1}"}}' in text
    assert f'topolink_gpu_nvlinks{{gpu="{gpu1}"}} 18.0' in text  # carried, not "no NVLink"
    page = get(served.url + "/")[1].decode()
    assert "stale since" in page and gpu1 in page
    assert json.loads(get(served.url + "/v1/topology")[1])["problems"]


def probe_children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat[1]) == pid and b"probes.harness._child" in cmd:
                out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    return stat[0] != "Z"


def test_hung_probe_is_killed_and_sighup_and_sigterm_during_a_probe(tmp_path: Path) -> None:
    # On this profile's NUMA node 1 (CPUs this machine lacks) the gloo ranks never meet: the item hangs.
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    s = start_serve(tmp_path, "--probe-tests", "all_reduce", "--probe-item-timeout", "6", "--discovery-interval",
                    "600", "--http-probe-token-file", str(token), measure=True)
    try:
        wait_for("a probe child", lambda: bool(probe_children(s.proc.pid)), timeout=30, every=0.05)
        s.proc.send_signal(signal.SIGHUP)
        wait_for("a SIGHUP discovery pass", lambda: "why=SIGHUP" in s.log_text(), timeout=15)
        wait_for("the hung item killed at its budget",
                 lambda: 'topolink_probe_runs_total{status="failed",test="all_reduce"} 1.0' in s.metrics(), timeout=40)
        assert "killed at its wall-time budget of 6 s" in s.log_text()
        assert get(s.url + "/readyz")[0] == 200
        wait_for("the pass to end", lambda: "probe pass ended" in s.log_text(), timeout=20)
        req = urllib.request.Request(s.url + "/v1/probe", method="POST", headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 202
        wait_for("a probe child of the requested pass", lambda: bool(probe_children(s.proc.pid)), timeout=30,
                 every=0.05)
        children = probe_children(s.proc.pid)
        t0 = time.monotonic()
        assert s.stop() == 0
        assert time.monotonic() - t0 < 5
        wait_for("probe children gone", lambda: not any(alive(c) for c in children), timeout=3, every=0.05)
        assert "agent stopped" in s.log_text()
    finally:
        s.stop()
