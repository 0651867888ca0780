"""``Building``: the cyclic garbage collector paused while a snapshot's values are built.

Reading a snapshot back at the limits makes some 300,000 new dicts, lists and records (the JSON parse, the
decoding, the structure hash's encoding). CPython starts a collection every 700 new objects, and every so often
one that traverses every object of the process, the new ones included (measured at the link limit: about a
quarter of the page's CPU), though none of them can be part of a cycle: a JSON document is a tree, and a record
is built from values that exist before it and never changes. Reference counting frees all of them as before;
only the search for cycles waits until the outermost ``Building`` ends, in whatever thread, and is left as it
was found (a process that turned the collector off keeps it off).
"""

from __future__ import annotations

import gc
import threading

_LOCK = threading.Lock()
_state = {"depth": 0, "resume": False}  # builds under way in any thread; whether the collector was on before


class Building:
    """``with Building():`` builds without the cyclic collector's passes (see the module)."""

    __slots__ = ()

    def __enter__(self) -> None:
        with _LOCK:
            if _state["depth"] == 0:
                _state["resume"] = gc.isenabled()
                gc.disable()
            _state["depth"] += 1

    def __exit__(self, *exc: object) -> None:
        with _LOCK:
            _state["depth"] -= 1
            if _state["depth"] == 0 and _state["resume"]:
                gc.enable()
