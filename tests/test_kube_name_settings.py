"""The settings that name Kubernetes things (label prefix, DRA driver names, namespace, node) are read by the API's
own naming rules where the flag or the variable is read: the issue's cases (``serve --label-prefix
'GPU_Topology!'``, ``--dra-driver-name Bad_Name``, ``cluster --label-prefix``) are one line naming the setting,
exit 2, in a real process, before any request (the kubeconfig names a server nobody listens on). The rule of
the flags and the agent's own check (``check_prefix``, ``SliceConfig``) give one verdict on every name tried.
tests/test_cli_settings.py walks every flag and variable of every command with each rule's bad examples."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter._core._kube_names import DRIVER, PREFIX
from exporter._core._settings import SettingError
from exporter.kube import InvalidObject
from exporter.kube._desired._names import check_prefix
from exporter.kube._desired._slices import SliceConfig

REPO = Path(__file__).resolve().parents[1]
NAMES = ["gpu.topology", "GPU_Topology!", "Bad_Name", "kubernetes.io", "a.kubernetes.io", "k8s.io", "x" * 63,
         "x" * 64, "a-b.c-d", "-a", "a-", "a..b", "a.", ".a", "", " ", "a/b", "0.1", "é",
         "gpu.topology\n", "gpu\n.topology"]


def _verdict(rule: object, text: str) -> bool:
    try:
        rule.parse(text)  # type: ignore[attr-defined]
    except SettingError:
        return False
    return True


def _agent(check: object, text: str) -> bool:
    try:
        check(text)  # type: ignore[operator]
    except (InvalidObject, ValueError):
        return False
    return True


@pytest.mark.parametrize("text", NAMES)
def test_the_flags_and_the_agent_agree_on_every_name(text: str) -> None:
    assert _verdict(PREFIX, text) == _agent(check_prefix, text)
    assert _verdict(DRIVER, text) == _agent(lambda d: SliceConfig(driver=d), text)


@given(st.text(alphabet="abAB09-._/!\n", max_size=70))
def test_the_flags_and_the_agent_agree_on_random_names(text: str) -> None:
    assert _verdict(PREFIX, text) == _agent(check_prefix, text)
    assert _verdict(DRIVER, text) == _agent(lambda d: SliceConfig(driver=d), text)


CASES = [
    (["serve", "--label-prefix", "GPU_Topology!"], {}, "--label-prefix"),
    (["serve", "--dra-driver-name", "Bad_Name"], {}, "--dra-driver-name"),
    (["serve", "--gpu-dra-driver", "gpu.nvidia.com."], {}, "--gpu-dra-driver"),
    (["serve"], {"TOPOLINK_LABEL_PREFIX": "GPU_Topology!"}, "$TOPOLINK_LABEL_PREFIX="),
    (["serve"], {"TOPOLINK_DRA_DRIVER_NAME": "Bad_Name"}, "$TOPOLINK_DRA_DRIVER_NAME="),
    (["serve"], {"POD_NAMESPACE": "Kube_System"}, "$POD_NAMESPACE="),
    (["prune", "--all-nodes", "--label-prefix", "GPU_Topology!"], {}, "--label-prefix"),
    (["prune", "--node-name", "Node_1"], {}, "--node-name"),
    (["cluster", "--label-prefix", "GPU_Topology!"], {}, "--label-prefix"),
    (["cluster", "--dra-driver-name", "Bad_Name"], {}, "--dra-driver-name"),
]


@pytest.mark.parametrize(("argv", "env", "named"), CASES, ids=[" ".join(a) + str(e) for a, e, _ in CASES])
def test_a_bad_name_is_one_line_and_exit_2_before_any_request(argv: list[str], env: dict[str, str], named: str,
                                                               tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"  # a server nobody listens on: a request would be a different error
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
                          "'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
                          "current-context: c\nusers: [{name: u, user: {token: t}}]\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_") and k != "POD_NAMESPACE"}
    run = subprocess.run([sys.executable, "-m", "agent.cli", *argv, "--kubeconfig", str(kubeconfig)],
                         capture_output=True, text=True, timeout=60, check=False, cwd=REPO,
                         env={**base, **env, "PYTHONPATH": str(REPO), "NODE_NAME": "n1"})
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"topolink {argv[0]}: ") and named in line and "DNS" in line, line
    assert "Traceback" not in run.stderr and run.stdout == ""
