"""The publishing side of the command line when things are wrong: a missing kubeconfig is a usage error (exit 2,
one line, no traceback) for ``serve`` and ``prune``, and an agent that cannot reach its API server with
``--log-format json`` writes JSON and nothing else (the failed publishes and the failing watch included)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.apiserver import free_port
from tests.fakenvml import materialize

TOPOLINK = Path(sys.executable).parent / "topolink"


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TOPOLINK_", "KUBECONFIG", "KUBERNETES_"))}


@pytest.mark.parametrize("command", [["serve", "--node-name", "n1", "--port", "0"], ["prune", "--all-nodes"]])
def test_a_missing_kubeconfig_is_a_usage_error(command: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "kubeconfig"
    proc = subprocess.run([str(TOPOLINK), *command, "--kubeconfig", str(missing)], capture_output=True, text=True,
                          timeout=60, env=clean_env(), check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"topolink {command[0]}: --kubeconfig {missing}:") and "not found" in line


def test_an_unreadable_kubeconfig_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [this is not: a kubeconfig\n")
    proc = subprocess.run([str(TOPOLINK), "prune", "--all-nodes", "--kubeconfig", str(bad)], capture_output=True,
                          text=True, timeout=60, env=clean_env(), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.slow
def test_json_logs_are_json_only_when_the_api_server_is_down(tmp_path: Path) -> None:
    machine = materialize("hgx-h100", tmp_path / "machine")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({  # a port nothing listens on: every request is refused
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "u", "user": {}}], "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(TOPOLINK), "serve", "--host", "127.0.0.1", "--port", str(free_port()), "--state-dir",
             str(tmp_path / "state"), "--probe-interval", "0", "--node-name", "n1", "--kubeconfig", str(kubeconfig),
             "--log-format", "json"], env=clean_env() | machine.env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        text = ""
        while time.monotonic() < deadline and not (text.count('"publish failed"') >= 2 and "watch failed" in text):
            time.sleep(0.2)
            text = log.read_text(errors="replace")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    events = [json.loads(line) for line in text.splitlines() if line.strip()]  # a plain line fails here
    names = [e["event"] for e in events]
    assert names.count("publish failed") >= 2, names  # labels and slices, each once a pass
    assert any(n.startswith("resource-slices: watch failed") for n in names), names
    assert [e["level"] for e in events if e["event"] == "publish failed"] == ["warning"] * names.count(
        "publish failed")
