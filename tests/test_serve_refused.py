"""A sink refused by the server (RBAC not yet there) or failing for passes on end: one log line with the
fix, one more when it publishes again, and the watch's refusal in the readiness detail until it is over."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.serve import Agent, ServeConfig
from agent.serve._log import fix_for
from exporter import PublishResult, WatchingSink, readiness
from tests.kmock_support import a100_node

FORBIDDEN = ('Forbidden: list resourceslices: 403 resourceslices.resource.k8s.io is forbidden: User '
             '"system:serviceaccount:topolink:topolink" cannot list resource "resourceslices" in API group '
             '"resource.k8s.io" at the cluster scope')


class Refused:
    """A watching sink whose pass and watch the server refuses until ``granted``."""

    name = "resource-slices"

    def __init__(self) -> None:
        self.granted = False

    def publish(self, snapshot: object) -> PublishResult:
        return PublishResult(written=1) if self.granted else PublishResult(failed=1, detail=FORBIDDEN)

    def watch(self, stop: threading.Event, wake: Callable[[str], None]) -> None:
        stop.wait()

    def wake_watch(self) -> None:
        pass

    def watch_restarts(self) -> dict[str, int]:
        return {"refused": 0 if self.granted else 3}

    def watch_error(self) -> str:
        return "" if self.granted else "watch refused (403): grant list and watch on resourceslices"


def test_the_fix_is_the_permission_the_server_names() -> None:
    assert fix_for(FORBIDDEN) == "grant the agent's ServiceAccount list on resourceslices (resource.k8s.io)"
    assert "PERMISSIONS" in fix_for("Forbidden: get node n1: 403")
    assert fix_for("Unavailable: get node n1: 503") == ""


def test_a_refused_sink_is_logged_once_and_its_watch_in_readiness(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    sink = Refused()
    assert isinstance(sink, WatchingSink)
    agent = Agent(ServeConfig(state_dir=tmp_path / "state", probe_interval_s=0), a100_node, dict, [sink],
                  log=logging.getLogger("test.refused"))
    caplog.set_level(logging.INFO, logger="test.refused")
    for _ in range(3):
        agent.discover_once("interval")
    failed = [r for r in caplog.records if r.getMessage() == "publish failed"]
    assert len(failed) == 1 and failed[0].fields["fix"].startswith("grant")  # type: ignore[attr-defined]
    code, text = readiness(agent.view)
    assert code == 200 and "degraded: resource-slices: watch refused (403): grant list and watch" in text

    sink.granted = True  # the RBAC arrives: no restart
    agent.discover_once("interval")
    assert [r.getMessage() for r in caplog.records].count("publish recovered") == 1
    assert readiness(agent.view) == (200, "ready\n")


def test_a_watch_that_fails_on_a_bug_is_run_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from agent.serve._run import Wake, watch_loop

    class Buggy(Refused):
        def __init__(self) -> None:
            super().__init__()
            self.runs = 0
            self.again = threading.Event()

        def watch(self, stop: threading.Event, wake: Callable[[str], None]) -> None:
            self.runs += 1
            if self.runs == 1:
                raise RuntimeError("a bug")
            self.again.set()
            stop.wait()

    sink = Buggy()
    agent = Agent(ServeConfig(state_dir=tmp_path / "state", probe_interval_s=0), a100_node, dict, [sink],
                  log=logging.getLogger("test.buggy"))
    caplog.set_level(logging.INFO, logger="test.buggy")
    loop = threading.Thread(target=watch_loop, args=(agent, sink, Wake()), kwargs={"first_s": 0.01}, daemon=True)
    loop.start()
    assert sink.again.wait(10), "the watch was not run again after its bug"
    agent.stopping.set()
    loop.join(10)
    assert not loop.is_alive() and sink.runs == 2
    assert [r.getMessage() for r in caplog.records].count("watch failed") == 1
