"""A create that answers 409: the object is there already. Read it; when it is ours by every mark but the
one that hid it (our label removed, say), take it over with a forced server-side apply, which writes every
field we send, our label included; when it is someone else's, say so once and leave it alone."""

from __future__ import annotations

import logging
from collections.abc import Callable

from .._api._api import Kind, KubeApi, Obj
from .._api._errors import Conflict

log = logging.getLogger(__name__)


class NotOurs(Conflict):
    """An object of the name we write exists and belongs to someone else: never overwritten."""


class Adopter:
    """Creates objects, adopting ours on a 409; remembers the names found to be someone else's (reported
    once: :meth:`still_foreign` skips them while the server still has them)."""

    def __init__(self, sink: str) -> None:
        self._sink = sink
        self._foreign: set[str] = set()

    def foreign(self, name: str) -> bool:
        return name in self._foreign

    def still_foreign(self, api: KubeApi, kind: Kind, name: str, namespace: str | None = None) -> bool:
        """``name`` was found to be someone else's and the server still has it (one read, only for such a name):
        the server's copy decides, so one that is gone is created again."""
        if name not in self._foreign:
            return False
        if api.get(kind, name, namespace) is not None:
            return True
        self.forget(name)
        return False

    def forget(self, name: str) -> None:
        """``name`` is no longer someone else's (the server has no such object): created and reported afresh."""
        self._foreign.discard(name)

    def disown(self, kind: Kind, name: str) -> NotOurs:
        """Remembers ``name`` as someone else's; the error to report, once."""
        self._foreign.add(name)
        log.warning("%s: %s %s exists and is not ours: left alone", self._sink, kind.kind, name)
        return NotOurs(f"{kind.kind} {name} exists and is someone else's: left alone")

    def create(self, api: KubeApi, kind: Kind, want: Obj, ours: Callable[[Obj], bool]) -> Obj:
        meta = want["metadata"]
        name, namespace = str(meta["name"]), meta.get("namespace")
        try:
            return api.create(kind, want)
        except Conflict:
            have = api.get(kind, name, namespace)
            if have is None:  # deleted in between
                return api.create(kind, want)
            if not ours(have):
                raise self.disown(kind, name) from None
            log.info("%s: %s %s is ours but was not in view (our label removed?): taken over", self._sink,
                     kind.kind, name)
            return api.apply(kind, want)
