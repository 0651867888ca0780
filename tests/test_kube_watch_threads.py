"""The pass and the watch in two real threads, as the agent runs them (the sync worker publishes, the watch thread
steps), under the random histories of ``tests/test_kube_watch_model.py``: the watch touches none of the sink's state
(it only queues what the sync worker should redo), so no slice is ever written with an owner uid of None, every
resumed watch's store is still the server's state at its resourceVersion, and the history converges once the
faults stop. The scripted server answers one request (or one event of a stream) at a time, under a lock; the
interpreter switches threads as often as it can, so the threads interleave within a pass and a step."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.kube._api._api import Kind, NodeView, Obj
from tests.budget import examples
from tests.kmock_support import a100_node
from tests.slice_script import FAULTS, ScriptedServer
from tests.test_kube_watch_model import Checked, assert_converges, play

# The model test's actions, less a watch step inside a write (here the watch is a thread of its own)
ACTIONS = st.sampled_from([
    *["pass", "step"] * 3, "wipe", "edit", "stale", "compact",
    *(("fault", f) for f in FAULTS), *(("step", f) for f in FAULTS),
    *(("during write", h) for h in ("wipe", "lost")),
    *(("time", s) for s in (1.0, 30.0, 61.0, 121.0, 301.0)),
])


@dataclass
class LockedServer(ScriptedServer):
    """One request, or one event of a stream, at a time."""

    lock: threading.RLock = field(default_factory=threading.RLock)

    def served_versions(self, group: str) -> Sequence[str]:
        with self.lock:
            return super().served_versions(group)

    def get_node(self, name: str) -> NodeView:
        with self.lock:
            return super().get_node(name)

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj | None:
        with self.lock:
            return super().get(kind, name, namespace)

    def list_versioned(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str]) -> tuple[list[Obj], str]:
        with self.lock:
            return super().list_versioned(kind, labels, fields)

    def create(self, kind: Kind, obj: Obj) -> Obj:
        with self.lock:
            return super().create(kind, obj)

    def apply(self, kind: Kind, obj: Obj) -> Obj:
        with self.lock:
            return super().apply(kind, obj)

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        with self.lock:
            super().delete(kind, name, namespace)

    def watch(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str],
              resource_version: str | None = None, initial: bool = False) -> Iterator[tuple[str, Obj]]:
        stream = super().watch(kind, labels, fields, resource_version, initial)
        while True:
            with self.lock:
                try:
                    item = next(stream)
                except StopIteration:
                    return
            yield item


class Threaded(Checked):
    """The model test's checked agent; a pass's check of a trusted view is left out (the server may change under a
    pass that runs beside the watch: freshness is the sequential model's to check)."""

    def publish(self) -> bool:
        return self.sink.publish(a100_node("n1")).ok


class Recorded:
    """The sink's own state (its chosen version, the Node's uid, the device taints), recording each thread that
    reads or writes it."""

    def __init__(self, inner: object, threads: set[str]) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_threads", threads)

    def __getattr__(self, name: str) -> Any:
        self._threads.add(threading.current_thread().name)
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: object) -> None:
        self._threads.add(threading.current_thread().name)
        setattr(self._inner, name, value)


def worker(jobs: queue.Queue[Callable[[], object] | None], errors: list[BaseException]) -> None:
    while (job := jobs.get()) is not None:
        try:
            job()
        except BaseException as exc:  # reported by the test, from its own thread
            errors.append(exc)


def owners(server: ScriptedServer) -> set[Any]:
    """Every owner uid a slice the server ever held carried."""
    return {ref.get("uid") for _, typ, obj in server.log if typ != "DELETED"
            for ref in obj["metadata"].get("ownerReferences") or []}


@settings(max_examples=examples(80, 600), deadline=None)
@given(st.lists(ACTIONS, max_size=30))
def test_the_pass_and_the_watch_in_threads_keep_the_model_tests_rules(history: list[Any]) -> None:
    server = LockedServer()
    agent = Threaded(server)
    passes: queue.Queue[Callable[[], object] | None] = queue.Queue()
    steps: queue.Queue[Callable[[], object] | None] = queue.Queue()
    errors: list[BaseException] = []
    touched: set[str] = set()
    agent.sink._d = Recorded(agent.sink._d, touched)  # type: ignore[assignment]
    threads = [threading.Thread(target=worker, args=(jobs, errors), name=name, daemon=True)
               for name, jobs in (("sync", passes), ("watch", steps))]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for action in history:
            if action == "pass":
                passes.put(agent.publish)
            elif action == "step":
                steps.put(agent.step)
            elif isinstance(action, tuple) and action[0] == "step":
                steps.put(lambda fault=action[1]: (server.faults.insert(0, fault), agent.step()))
            else:
                with server.lock:
                    play(agent, action)
        for jobs in (passes, steps):
            jobs.put(None)
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert "watch" not in touched, "the watch thread touched the sink's state"
    assert owners(server) <= {"uid-n1"}, f"a slice written with owner uids {owners(server)}"
    assert_converges(agent, server, history.count("pass"))
