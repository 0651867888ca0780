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
* **Convergence by the agent's own wakes**: once the faults stop, the agent converges within a few watch steps,
  each followed by the sync the sync worker would run then (one the watch queued, the requeue of a failed sync, or
  a discovery pass only where one is due: no pass yet, no store yet, or a discovery interval gone by): the server
  holds what the agent wants (a new agent, listing for itself, finds nothing to write), the view is the server's,
  and no later sync writes (nothing flaps). A sync lost (no requeue after a reply the store went past) or a reply
  believed over a store that went past it fails here, not only after a discovery pass repairs it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.kube._api._api import BOOKMARK_INTERVAL_S, Kind, Obj
from exporter.kube._api._errors import Unavailable
from exporter.kube._sinks._slice_cache import MUTATION_TTL_S
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

    failed = False  # the last sync failed: the sync worker requeues it
    synced_at = 0.0  # the last sync (``server.now``)
    listed = False  # the last sync ended with no store to compare with (it listed for itself)

    def publish(self) -> bool:
        view = self.sink.cache.view()
        if view is not None and self.server.now - self.changed_at >= BOOKMARK_INTERVAL_S:
            server = versions(list(self.server.objects.values()))
            assert versions(view) == server, f"trusted {versions(view)} at {self.server.now}, server had {server}"
        self.failed = not super().publish()
        self.synced_at = self.server.now  # its end: a write's reply and the mutation cache's TTL start late in it
        self.listed = self.sink.cache.view() is None  # it ended with no store: it listed for itself
        return not self.failed


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


WRITES = ("CREATE", "APPLY", "DELETE")
DISCOVERY_INTERVAL_S = MUTATION_TTL_S  # the default discovery interval: the agent's passes come at least so often
QUIET_ROUNDS = 4  # watch steps after the faults stop, each followed by a sync when one is queued


def assert_converges(agent: Checked, server: ScriptedServer, passes: int) -> None:
    """Once faults stop, the agent converges with no discovery pass, within ``QUIET_ROUNDS`` watch steps each
    followed by the sync the sync worker would run then (one woken by the watch, or the requeue of a failed sync;
    a discovery pass only where one is due):
    the server holds what the agent wants (a new agent finds nothing to write), the view is the server's, and no
    sync after that writes (nothing flaps). With no pass in the history, the first sync is the agent's start."""
    server.faults, server.during_write = [], None
    # a sync is due at once: a failed one's requeue; or a discovery pass, where the agent never synced, where the
    # last sync had no store (it listed for itself: the first state wakes the agent only for what its own writes
    # showed, a known gap the next pass closes), or where a discovery interval (60 s, the mutation cache's TTL too)
    # has gone by since the last one
    failed = (not passes or agent.failed or agent.listed or not agent.sink.cache.synced()
              or server.now - agent.synced_at >= DISCOVERY_INTERVAL_S)
    for _ in range(QUIET_ROUNDS):
        agent.step()
        if agent.woken or failed:
            agent.woken.clear()
            failed = not agent.publish()
    assert not failed and not agent.woken, "still syncing after the faults stopped"
    assert NAME in server.objects and STALE not in server.objects, f"server holds {sorted(server.objects)}"
    assert Agent(server).sink.publish(a100_node("n1")).written == 0, "the server does not hold what the agent wants"
    mark = len(server.requests)
    for _ in range(2):  # quiescent: a step wakes nothing, and a sync (a discovery pass's) writes nothing
        agent.step()
        assert agent.publish() and not agent.woken
    assert agent.view() == names(list(server.objects.values()))
    assert not [r for r in agent.since(mark) if r.startswith(WRITES)], f"flapping: {agent.since(mark)}"


@settings(max_examples=examples(250, 2400), deadline=None)
@given(st.lists(ACTIONS, max_size=30))
def test_any_history_keeps_the_reflectors_invariant_a_fresh_view_and_converges(history: list[Any]) -> None:
    server = ScriptedServer()
    agent = Checked(server)
    for action in history:
        play(agent, action)
    assert_converges(agent, server, history.count("pass"))
