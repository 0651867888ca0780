"""The slice sink's pass and its watch under random histories: passes, watch steps, kubelet's deletes, someone
else's edits, a leftover slice the agent must delete, a server that loses its events, each fault of the scripted
server (``tests/slice_script.py``), time passing, and writes whose replies are lost or overtaken by the watch or a
delete, in any order. Three rules hold for every history, checked by hypothesis over histories nobody wrote down
(the cases of ``tests/test_kube_watch_loop.py`` are some of them):

* **The reflector's invariant**: whenever the watch resumes from a resourceVersion, its store is exactly the
  server's state at that resourceVersion (every name, at the resourceVersion it had then). A store that resumes
  past a delete it never saw, or that a pass's list overwrote, breaks it.
* **A trusted view is at most a bookmark interval behind**: when a pass plans against the cache (its view is not
  None) and the server has changed nothing for a bookmark interval, the view is the server's state.
* **Convergence**: once the faults stop, two watch steps with a pass after each (the first may meet a 410, the
  second gets the state back) leave the server holding what the agent wants (a new agent, listing for itself,
  finds nothing to write), and the agent's view is the server's with nothing more to wake it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.kube._api._api import BOOKMARK_INTERVAL_S, Kind, Obj
from exporter.kube._api._errors import Unavailable
from tests.budget import examples
from tests.kmock_support import a100_node
from tests.slice_script import FAULTS, ScriptedServer, names
from tests.test_kube_watch_loop import NAME, Agent

STALE = "n1-gpu.topology-9"  # a slice of ours the agent no longer wants (a leftover of an older configuration)
HOOKS = ("wipe", "step", "wipe, step", "step, wipe", "lost")  # what happens while a write is in flight
# Every action as likely as any other, a pass and a watch step three times as likely: each perturbation needs
# one of them around it to matter.
ACTIONS = st.sampled_from([
    *["pass", "step"] * 3, "wipe", "edit", "stale", "compact",
    *(("fault", f) for f in FAULTS),  # for the next watch, whenever it comes
    *(("step", f) for f in FAULTS),  # the next watch, now
    *(("during write", h) for h in HOOKS),
    *(("time", s) for s in (1.0, 30.0, 61.0, 121.0, 301.0)),
])


def versions(objs: Iterator[Obj] | list[Obj]) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in objs}


def state_at(server: ScriptedServer, rv: int) -> dict[str, str]:
    """Name to resourceVersion of every object the server held at ``rv`` (its log holds every change)."""
    held: dict[str, str] = {}
    for at, typ, obj in server.log:
        if at > rv:
            break
        if typ == "DELETED":
            held.pop(obj["metadata"]["name"], None)
        else:
            held[obj["metadata"]["name"]] = obj["metadata"]["resourceVersion"]
    return held


class Checked(Agent):
    """An agent whose every resumed watch is checked against the server's state at its resourceVersion, and whose
    every pass against the server's state when the server has been still for a bookmark interval."""

    def __init__(self, server: ScriptedServer) -> None:
        super().__init__(server)
        self.changed_at = server.now  # the server's last change (``server.now``)
        scripted, change = server.watch, server._change

        def watch(kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str],
                  resource_version: str | None = None, initial: bool = False) -> Iterator[tuple[str, Obj]]:
            if resource_version is not None:
                stored = versions(self.sink.cache.stored())
                expected = state_at(server, int(resource_version))
                assert stored == expected, f"resumed from {resource_version} holding {stored}, server had {expected}"
            return scripted(kind, labels, fields, resource_version, initial)

        def changed(typ: str, obj: Obj) -> Obj:
            self.changed_at = server.now
            return change(typ, obj)
        server.watch = watch  # type: ignore[method-assign]
        server._change = changed  # type: ignore[method-assign]

    def publish(self) -> bool:
        view = self.sink.cache.view()
        if view is not None and self.server.now - self.changed_at >= BOOKMARK_INTERVAL_S:
            server = versions(list(self.server.objects.values()))
            assert versions(view) == server, f"trusted {versions(view)} at {self.server.now}, server had {server}"
        return super().publish()


def hook(agent: Agent, what: str) -> Callable[[], None]:
    server = agent.server

    def wipe() -> None:
        if NAME in server.objects:
            server.delete_as_kubelet(NAME)

    def lost() -> None:
        raise Unavailable("apply resourceslice: ReadTimeout")  # applied by the server, the reply lost

    steps: dict[str, Callable[[], object]] = {"wipe": wipe, "step": agent.step, "lost": lost}

    def run() -> None:
        for part in what.split(", "):
            steps[part]()
    return run


def play(agent: Agent, action: Any) -> None:
    server = agent.server
    if action == "pass":
        agent.publish()
    elif action == "step":
        agent.step()
    elif action == "wipe":
        hook(agent, "wipe")()
    elif action in ("edit", "stale") and NAME in server.objects:
        changed = copy.deepcopy(server.objects[NAME])
        if action == "edit":
            changed["metadata"]["labels"] = {}
        else:
            changed["metadata"]["name"] = STALE
        server._change("MODIFIED" if action == "edit" else "ADDED", changed)
    elif action == "compact":
        server.compact()
    elif action[0] == "fault":
        server.faults.append(action[1])
    elif action[0] == "step":
        server.faults.insert(0, action[1])
        agent.step()
    elif action[0] == "during write":
        server.during_write = hook(agent, action[1])
    elif action[0] == "time":
        server.now += action[1]


def assert_converges(agent: Checked, server: ScriptedServer) -> None:
    """Once faults stop, two watch steps with a pass after each leave the server holding what the agent wants: a new
    agent finds nothing to write, and the first agent's view equals the server's with nothing left to wake it."""
    server.faults, server.during_write = [], None
    for _ in range(2):
        agent.step()
        agent.publish()
    assert NAME in server.objects and STALE not in server.objects
    assert Agent(server).sink.publish(a100_node("n1")).written == 0, "the server does not hold what the agent wants"
    woken = len(agent.woken)
    agent.step()
    assert agent.view() == names(list(server.objects.values())) and len(agent.woken) == woken


@settings(max_examples=examples(250, 2400), deadline=None)
@given(st.lists(ACTIONS, max_size=30))
def test_any_history_keeps_the_reflectors_invariant_a_fresh_view_and_converges(history: list[Any]) -> None:
    server = ScriptedServer()
    agent = Checked(server)
    for action in history:
        play(agent, action)
    assert_converges(agent, server)
