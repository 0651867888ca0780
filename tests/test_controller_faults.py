"""What the fault benchmark found in the fleet controller (``benchmarks/faults.py``'s controller table): a server
that answers every watch with 410 Gone had each informer list its whole kind again at once, in a loop (about 80
requests a second from one controller of 40 nodes; a fleet's whole list each time). A 410 lists again at once
the first time, then on the informer's backoff, whose longest wait is client-go's reflector's (30 s: a node's
change is seen within it once the server answers; the agent's 5 minutes made one 103 s late). And what timing a
node's move to a class no node had found: a class was read from its first member's slices alone, so a first
member caught between its new label and its new slice left its whole class out, and the controller deleted the
class's templates until the next sync."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from benchmarks.controller import lost_gpu
from exporter.kube import Backoff, Expired, Kind
from exporter.kube._api._errors import Silent
from exporter.kube._controller._informer import ERROR_WINDOW_S, MAX_WAIT_S, Informer
from exporter.kube._fleet._claims_read import claim_classes

NODES = Kind("", "v1", "Node", "nodes")


class ExpiringApi:
    """Lists answered; every watch opened and then ended by 410. ``stop`` is set at the ``watches``th watch."""

    def __init__(self, stop: threading.Event, watches: int, error: Exception | None = None) -> None:
        self.stop, self.watches, self.lists, self.opened = stop, watches, 0, 0
        self.error = error or Expired("too old resource version (injected)")

    def list_versioned(self, kind: Kind, labels: Mapping[str, str],
                       fields: Mapping[str, str]) -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        return [{"metadata": {"name": "n1", "resourceVersion": "5"}}], "5"

    def watch(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str],
              resource_version: str | None = None, initial: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        self.opened += 1
        yield "OPEN", {}
        if self.opened >= self.watches:
            self.stop.set()  # the wait that follows ends at once: no real time passes in the test
        raise self.error


def test_a_410_after_a_410_lists_again_on_the_backoff_not_at_once() -> None:
    stop, said = threading.Event(), list[str]()
    api = ExpiringApi(stop, watches=2)
    informer = Informer(api, NODES, keep=lambda o: {}, changed=lambda: None, log=said.append)  # type: ignore[arg-type]
    informer.run(stop)
    assert api.lists == 2 and api.opened == 2  # the first 410: listed again at once
    waits = [float(m[1]) for line in said if (m := re.search(r"listed again in ([0-9.]+) s", line))]
    assert len(waits) == 1 and waits[0] >= ERROR_WINDOW_S, said  # the second: on the backoff, its floor at least


class Instant(threading.Event):
    """A stop event whose waits return at once, moving a simulated clock instead: the informer's waits are read
    from its log, not spent."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0

    def wait(self, timeout: float | None = None) -> bool:
        self.now += timeout or 0.0
        return self.is_set()


def test_410_after_410_waits_longer_each_time_up_to_the_reflectors_longest() -> None:
    stop, said = Instant(), list[str]()
    api = ExpiringApi(stop, watches=14)
    informer = Informer(api, NODES, keep=lambda o: {}, changed=lambda: None, log=said.append,  # type: ignore[arg-type]
                        backoff=Backoff(cap=MAX_WAIT_S, clock=lambda: stop.now))  # the default's, on the clock
    informer.run(stop)
    waits = [float(m[1]) for line in said if (m := re.search(r"listed again in ([0-9.]+) s", line))]
    assert api.lists == 14 and len(waits) == 13, said
    assert all(w <= MAX_WAIT_S for w in waits) and max(waits) >= MAX_WAIT_S / 2, waits  # jitter: upper half

def test_a_class_whose_first_member_is_between_label_and_slice_is_read_from_the_next() -> None:
    import json
    from pathlib import Path

    items = json.loads((Path(__file__).parent / "data" / "fleet" / "gb200-racks-topograph.json").read_text())["items"]
    slices = {o["spec"]["nodeName"]: [o] for o in items if o["kind"] == "ResourceSlice"}
    labels = {o["metadata"]["name"]: o["metadata"]["labels"] for o in items if o["kind"] == "Node"}
    cls = labels["tray-00"]["gpu.topology/claim-class"]
    members = sorted(n for n, held in labels.items() if held.get("gpu.topology/claim-class") == cls)
    assert members[0] == "tray-00" and len(members) >= 2
    slices["tray-00"] = lost_gpu(slices["tray-00"])[0]  # its slice rewritten, its label not yet
    read = claim_classes({cls: members}, lambda n: slices.get(n, []), "gpu.topology")
    assert not read.problems and [c.id for c in read.classes] == [cls]
    assert read.classes[0].groups.gpus == 4  # the next member's groups, not the lone first one's
    for n in members[:3]:  # none of three right: left out, the first one that was not said
        slices[n] = lost_gpu(slices[n])[0]
    read = claim_classes({cls: members}, lambda n: slices.get(n, []), "gpu.topology")
    assert not read.classes and len(read.problems) == 1
    assert read.problems[0].startswith(f"class {cls}: the slices of node tray-00 make class ")
    assert read.problems[0].endswith("pool being rewritten): left out")


def test_a_silent_stream_is_listed_and_watched_again_at_once_the_first_time_then_on_the_backoff() -> None:
    """What a silent path swallowed is read by a list (a watch from where it stopped, opened while the path still
    drops events, would be as silent: the benchmark's controller was right again 66 s after a silent fault)."""
    stop, said = Instant(), list[str]()
    api = ExpiringApi(stop, watches=3, error=Silent("watch nodes: nothing for 75 s"))
    informer = Informer(api, NODES, keep=lambda o: {}, changed=lambda: None, log=said.append,  # type: ignore[arg-type]
                        backoff=Backoff(cap=MAX_WAIT_S, clock=lambda: stop.now))
    informer.run(stop)
    waits = [float(m[1]) for line in said if (m := re.search(r"again in ([0-9.]+) s", line))]
    assert api.lists == 3 and waits[0] == 0.0 and all(w >= ERROR_WINDOW_S / 2 for w in waits[1:]), said


def test_failures_of_requests_in_flight_together_count_once() -> None:
    """The smoke run found it: a 4 s outage broke six informers' watches of one client at once; each failure
    counted doubled the client's wait, and the controller was right again 45 s after the fault ended."""
    now = [100.0]
    backoff = Backoff(clock=lambda: now[0])
    first = backoff.failed("500")
    assert all(abs(backoff.failed("500") - first) < 1e-9 for _ in range(5)) and backoff.failures == 1
    assert backoff.failed("429", retry_after=30.0) == 30.0  # a longer Retry-After still holds
    now[0] += 30.0
    backoff.failed("500")  # after the wait: the next failure in a row
    assert backoff.failures == 2
