"""The real :class:`~._api.KubeApi`: lightkube (sync), in-cluster config or kubeconfig.

lightkube brings typed models up to 1.37, server-side apply and generic resources; ResourceSlices and
DeviceTaintRules go through generic resources because their version is chosen at run time by discovery and
our objects are already validated JSON. Every lightkube/httpx error is mapped here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any, TypeVar

from ._api import MANAGER, Kind, NodeView, Obj
from ._errors import Conflict, Forbidden, InvalidObject, NotFound, PublishError, Unavailable
from ._retry import RETRYABLE, Backoff, Retryable, retry_after

T = TypeVar("T")
# The API server ends a watch after this; lightkube opens it again from the last resourceVersion seen.
_WATCH_SERVER_TIMEOUT_S = 300


def _error(what: str, code: int, message: str = "") -> PublishError:
    cls = (Forbidden if code in (401, 403) else NotFound if code == 404 else Conflict if code == 409 else
           Unavailable if code in RETRYABLE else InvalidObject)
    return cls(f"{what}: {code} {message}".rstrip())


@contextmanager
def _mapped(what: str) -> Iterator[None]:
    import httpx2
    from lightkube import ApiError

    try:
        yield
    except httpx2.HTTPStatusError as exc:  # lightkube's ApiError, or a body it could not read as a Status
        code = exc.response.status_code
        status = exc.status if isinstance(exc, ApiError) else None
        err = _error(what, code, (status.message or "") if status else "")
        if code in RETRYABLE:
            raise Retryable(err, retry_after(exc.response.headers.get("Retry-After"))) from exc
        raise err from exc
    except httpx2.TransportError as exc:
        err = Unavailable(f"{what}: {type(exc).__name__}: {exc}")
        raise Retryable(err) from exc


@cache
def _resource(kind: Kind) -> Any:
    from lightkube.generic_resource import create_global_resource, create_namespaced_resource

    make = create_namespaced_resource if kind.namespaced else create_global_resource
    return make(kind.group, kind.version, kind.kind, kind.plural)


def _node_view(node: Any) -> NodeView:
    meta = node.metadata
    owned: set[str] = set()
    others: set[str] = set()
    for entry in meta.managedFields or []:
        keys = {k.removeprefix("f:") for k in ((entry.fieldsV1 or {}).get("f:metadata", {}).get("f:labels") or {})}
        (owned if entry.manager == MANAGER else others).update(keys)
    return NodeView(name=meta.name, uid=meta.uid or "", labels=dict(meta.labels or {}), owned=frozenset(owned),
                    others=frozenset(others))


class LightkubeApi:
    def __init__(self, client: Any, backoff: Backoff | None = None) -> None:
        self._client = client
        self._backoff = backoff or Backoff()

    @classmethod
    def connect(cls, kubeconfig: str | None = None, server: str | None = None, timeout: float = 10.0,
                backoff: Backoff | None = None) -> LightkubeApi:
        """In-cluster service account, ``$KUBECONFIG`` or ``~/.kube/config``, or an explicit file or URL."""
        from lightkube import Client, KubeConfig

        if server:  # a bare URL, no credentials: test servers
            config = KubeConfig.from_dict({
                "clusters": [{"name": "c", "cluster": {"server": server}}], "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"})
        else:
            config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
        import httpx2

        return cls(Client(config=config, field_manager=MANAGER, timeout=httpx2.Timeout(timeout)), backoff)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        def once() -> T:
            with _mapped(what):
                return fn()
        return self._backoff.run(once)

    def _raw_get(self, path: str) -> Any:
        """Discovery and /version: lightkube has no call for them, so its configured httpx client is used."""
        http = self._client._client._client  # lightkube's httpx client: auth and base URL set

        def once() -> Any:
            with _mapped(f"GET {path}"):
                resp = http.get(path)
            if resp.status_code in RETRYABLE:
                raise Retryable(Unavailable(f"GET {path}: {resp.status_code}"),
                                retry_after(resp.headers.get("Retry-After")))
            if resp.status_code in (401, 403):
                raise Forbidden(f"GET {path}: {resp.status_code}")
            return resp.json() if resp.status_code == 200 else {}
        return self._backoff.run(once)

    def served_versions(self, group: str) -> Sequence[str]:
        return [str(v["version"]) for v in self._raw_get(f"/apis/{group}").get("versions", [])]

    def server_minor(self) -> int:
        return int("".join(c for c in str(self._raw_get("/version").get("minor", "0")) if c.isdigit()) or 0)

    def get_node(self, name: str) -> NodeView:
        from lightkube.resources.core_v1 import Node

        return _node_view(self._call(f"get node {name}", lambda: self._client.get(Node, name)))

    def list_nodes(self) -> Sequence[NodeView]:
        from lightkube.resources.core_v1 import Node

        return [_node_view(n) for n in self._call("list nodes", lambda: list(self._client.list(Node)))]

    def apply_node_labels(self, name: str, labels: Mapping[str, str]) -> None:
        from lightkube.resources.core_v1 import Node
        from lightkube.types import PatchType

        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)}}
        self._call(f"apply labels to node {name}", lambda: self._client.patch(
            Node, name, body, patch_type=PatchType.APPLY, field_manager=MANAGER, force=True))

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj | None:
        res = _resource(kind)
        kw = {"namespace": namespace} if kind.namespaced else {}
        try:
            return dict(self._call(f"get {kind.kind} {name}", lambda: self._client.get(res, name, **kw)).to_dict())
        except NotFound:
            return None

    def list(self, kind: Kind, labels: Mapping[str, str], namespace: str | None = None) -> list[Obj]:
        res = _resource(kind)
        selector = dict(labels)
        if kind.namespaced:
            found = self._call(f"list {kind.plural}", lambda: list(
                self._client.list(res, namespace=namespace or "*", labels=selector)))
        else:
            found = self._call(f"list {kind.plural}", lambda: list(self._client.list(res, labels=selector)))
        items = [dict(o.to_dict()) for o in found]
        return [o for o in items if all((o.get("metadata", {}).get("labels") or {}).get(k) == v
                                         for k, v in selector.items())]

    def create(self, kind: Kind, obj: Obj) -> Obj:
        res = _resource(kind)
        return dict(self._call(f"create {kind.kind} {obj['metadata']['name']}",
                               lambda: self._client.create(res.from_dict(obj))).to_dict())

    def apply(self, kind: Kind, obj: Obj) -> Obj:
        from lightkube.types import PatchType

        res, meta = _resource(kind), obj["metadata"]
        kw = {"namespace": meta.get("namespace")} if kind.namespaced else {}
        return dict(self._call(f"apply {kind.kind} {meta['name']}", lambda: self._client.patch(
            res, meta["name"], obj, patch_type=PatchType.APPLY, field_manager=MANAGER, force=True, **kw)).to_dict())

    def watch(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str]) -> Iterator[tuple[str, Obj]]:
        res = _resource(kind)
        try:
            with _mapped(f"watch {kind.plural}"):
                for typ, obj in self._client.watch(res, labels=dict(labels), fields=dict(fields),
                                                   server_timeout=_WATCH_SERVER_TIMEOUT_S):
                    yield str(typ), dict(obj.to_dict())
        except Retryable as exc:  # the caller owns the backoff of a long-lived stream
            raise exc.error from exc

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        res = _resource(kind)
        if kind.namespaced:
            self._call(f"delete {kind.kind} {name}", lambda: self._client.delete(res, name, namespace=namespace))
        else:
            self._call(f"delete {kind.kind} {name}", lambda: self._client.delete(res, name))
