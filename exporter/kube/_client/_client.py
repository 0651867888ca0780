"""The real :class:`~._api.KubeApi`: lightkube (sync), in-cluster config or kubeconfig.

lightkube brings typed models up to 1.37, server-side apply and generic resources; ResourceSlices and
DeviceTaintRules go through generic resources because their version is chosen at run time by discovery and
our objects are already validated JSON. Every lightkube/httpx error is mapped here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache, cached_property
from typing import Any, TypeVar

from .._api._api import MANAGER, Kind, NodeView, Obj, Objs
from .._api._errors import BackingOff, BadConfig, Forbidden, NotFound, Unavailable
from .._api._retry import RETRYABLE, Backoff, Retryable, retry_after
from ._mapped import mapped as _mapped
from ._watch_stream import OPEN, error_for, matches, path_of, selector, stream_events, watch_timeout_s

T = TypeVar("T")
# Idle connections are kept this long (httpx's default is 5 s): longer than the discovery interval (60 s by
# default), so every pass reuses one TLS connection instead of paying a handshake. kube-apiserver closes an
# idle HTTP/1.1 connection after 90 s; at longer intervals a pass opens a new one, as it must.
KEEPALIVE_S = 600.0


def user_agent() -> str:
    """``topolink/<version>``: the API server's audit log and its request metrics name us by it."""
    from importlib import metadata

    try:
        return f"topolink/{metadata.version('topolink')}"
    except metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "topolink/0+unknown"


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
    def __init__(self, client: Callable[[], Any], backoff: Backoff | None = None, http: Any = None,
                 manager: str = MANAGER, pages: Any = None) -> None:
        self._make_client = client  # makes lightkube's client, on first use (``cluster`` only lists pages)
        self._manager = manager  # the field manager of every apply: the agent's, or the fleet controller's
        self._http = http  # an httpx client for what lightkube has no call for: auth, TLS, base URL as lightkube's
        self._pages = pages or http  # the same, over the transport of whole list pages (``_bulk``)
        self._backoff = backoff or Backoff()

    @cached_property
    def _client(self) -> Any:
        return self._make_client()

    @classmethod
    def connect(cls, kubeconfig: str | None = None, server: str | None = None, timeout: float = 10.0,
                backoff: Backoff | None = None, transport: Any = None, *, manager: str = MANAGER) -> LightkubeApi:
        """In-cluster service account, ``$KUBECONFIG`` or ``~/.kube/config``, or an explicit file or URL.
        :class:`~._errors.BadConfig` when none can be read. ``transport``: an httpx transport (tests and
        benchmarks count the bytes of the responses through one)."""
        from ssl import PROTOCOL_TLS_CLIENT, SSLContext

        import httpx2
        import yaml
        from lightkube import Client, ConfigError, KubeConfig
        from lightkube.config.client_adapter import user_auth, verify_cluster

        from ._bulk import PageTransport
        from ._transport import UserAgent

        try:
            if server:  # a bare URL, no credentials: test servers
                config = KubeConfig.from_dict({
                    "clusters": [{"name": "c", "cluster": {"server": server}}], "users": [{"name": "u", "user": {}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x"})
            else:
                config = KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()
            single = config.get()
            if single is None or single.user is None:
                raise ValueError("no current context")
            # one transport for lightkube's requests and ours (discovery, watches): one connection pool, idle
            # connections kept KEEPALIVE_S, and our User-Agent on every request; list pages, megabytes each, go
            # over http.client (``_bulk``) with the same TLS context and auth; plain HTTP loads no CA bundle
            tls = (verify_cluster(single.cluster, single.user, single.abs_file)
                   if str(single.cluster.server).lower().startswith("https:") else SSLContext(PROTOCOL_TLS_CLIENT))
            inner = transport or httpx2.HTTPTransport(verify=tls, limits=httpx2.Limits(keepalive_expiry=KEEPALIVE_S))
            shared = UserAgent(inner, user_agent())

            def client() -> Any:  # from what was read and checked above; building it builds its TLS context again
                return Client(config=config, field_manager=MANAGER, timeout=httpx2.Timeout(timeout), transport=shared)
            auth = user_auth(single.user)
            http = httpx2.Client(base_url=single.cluster.server, auth=auth, transport=shared,
                                 timeout=httpx2.Timeout(timeout))
            pages = http if transport else httpx2.Client(
                base_url=single.cluster.server, auth=auth, timeout=httpx2.Timeout(timeout),
                transport=UserAgent(PageTransport(tls), user_agent()))
        except (ConfigError, OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
            where = f"--kubeconfig {kubeconfig}" if kubeconfig else "Kubernetes configuration"
            raise BadConfig(f"{where}: {exc}") from exc
        return cls(client, backoff, http, manager, pages)

    def _refuse(self, what: str) -> Callable[[float], Exception]:
        b = self._backoff

        def refused(wait: float) -> Exception:
            return BackingOff(f"{what}: not sent, the server failed {b.failures} times in a row "
                              f"(last: {b.last_error}); next try in {wait:.0f} s", wait)
        return refused

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        def once() -> T:
            with _mapped(what):
                return fn()
        return self._run(once, what)

    def _run(self, once: Callable[[], T], what: str) -> T:
        """``once`` under the client's backoff. A failure the backoff counted carries the wait before the client
        sends again (``retry_in``), so that a caller's requeue is not sooner than a refusal unsent."""
        try:
            return self._backoff.run(once, self._refuse(what))
        except Unavailable as exc:
            if not isinstance(exc, BackingOff):
                exc.retry_in = self._backoff.wait_s()
            raise

    def _raw_get(self, path: str) -> Any:
        """Discovery and /version: lightkube has no call for them, so its configured httpx client is used."""
        http = self._http

        def once() -> Any:
            with _mapped(f"GET {path}"):
                resp = http.get(path)
            if resp.status_code in RETRYABLE:
                raise Retryable(Unavailable(f"GET {path}: {resp.status_code}"),
                                retry_after(resp.headers.get("Retry-After")))
            if resp.status_code in (401, 403):
                raise Forbidden(f"GET {path}: {resp.status_code}")
            return resp.json() if resp.status_code == 200 else {}
        return self._run(once, f"GET {path}")

    def get_page(self, path: str, params: Mapping[str, str], accept: str | None = None) -> bytes:
        """One page of a list, its JSON body undecoded (``limit``/``continue`` in ``params``), retried as every
        call is; 410 Gone (an expired continue token) raises :class:`~._errors.Expired`."""
        http = self._pages
        headers = {"Accept": accept} if accept else {}

        def once() -> bytes:
            with _mapped(f"GET {path}"):
                resp = http.get(path, params=dict(params), headers=headers)
            if resp.status_code != 200:
                err = error_for(f"GET {path}", resp.status_code, resp.text[:200])
                if resp.status_code in RETRYABLE:
                    raise Retryable(err, retry_after(resp.headers.get("Retry-After")))
                raise err
            return bytes(resp.content)
        return self._run(once, f"GET {path}")

    def served_versions(self, group: str) -> Sequence[str]:
        return [str(v["version"]) for v in self._raw_get(f"/apis/{group}").get("versions", [])]

    def served_resources(self, group: str, version: str) -> frozenset[str]:
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        return frozenset(str(r.get("name", "")) for r in self._raw_get(base).get("resources", []))

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

    def list(self, kind: Kind, labels: Mapping[str, str], namespace: str | None = None,
             fields: Mapping[str, str] | None = None) -> list[Obj]:
        if kind.namespaced and namespace is None:
            namespace = "*"
        return self._list(kind, labels, fields or {}, namespace)[0]

    def list_versioned(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str], *,
                       namespace: str | None = None) -> tuple[Objs, str]:
        from lightkube import ALL_NS

        if not kind.namespaced:
            namespace = None
        elif namespace is None:
            namespace = ALL_NS  # every namespace, as a watch
        return self._list(kind, labels, fields, namespace)

    def _list(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str],
              namespace: str | None) -> tuple[Objs, str]:
        res = _resource(kind)
        kw: dict[str, Any] = {"labels": dict(labels)} if labels else {}
        if fields:
            kw["fields"] = dict(fields)
        if kind.namespaced:
            kw["namespace"] = namespace

        def fetch() -> tuple[list[Any], str]:
            from lightkube import NotReadyError

            found = self._client.list(res, **kw)
            items = list(found)
            try:
                return items, str(found.resourceVersion)
            except NotReadyError:  # a list response without a resourceVersion
                return items, ""
        found, rv = self._call(f"list {kind.plural}", fetch)
        items = [dict(o.to_dict()) for o in found]
        # the server filtered already; a server that ignores a selector (an emulator) is filtered here
        return [o for o in items if matches(o, labels, fields)], rv
    def create(self, kind: Kind, obj: Obj) -> Obj:
        res = _resource(kind)
        return dict(self._call(f"create {kind.kind} {obj['metadata']['name']}",
                               lambda: self._client.create(res.from_dict(obj))).to_dict())

    def apply(self, kind: Kind, obj: Obj) -> Obj:
        from lightkube.types import PatchType

        res, meta = _resource(kind), obj["metadata"]
        kw = {"namespace": meta.get("namespace")} if kind.namespaced else {}
        return dict(self._call(f"apply {kind.kind} {meta['name']}", lambda: self._client.patch(
            res, meta["name"], obj, patch_type=PatchType.APPLY, field_manager=self._manager, force=True,
            **kw)).to_dict())

    def on_answer(self, callback: Callable[[], None]) -> None:
        self._backoff.on_answer(callback)

    def watch(self, kind: Kind, labels: Mapping[str, str], fields: Mapping[str, str],
              resource_version: str | None = None, initial: bool = False, *,
              namespace: str | None = None) -> Iterator[tuple[str, Obj]]:
        timeout = watch_timeout_s()
        params = {"watch": "true", "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout)}
        if initial:
            params |= {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"}
        if labels:
            params["labelSelector"] = selector(labels)
        if fields:
            params["fieldSelector"] = selector(fields)
        if resource_version and not initial:
            params["resourceVersion"] = resource_version
        what, b = f"watch {kind.plural}", self._backoff
        if (due := b.wait_s()) > 0:  # the client backs off from a failing server: not sent before its next try
            raise self._refuse(what)(due)
        opened = False
        try:
            for typ, obj in stream_events(self._http, path_of(kind, namespace if kind.namespaced else None),
                                          params, what):
                if typ == OPEN:
                    opened = True
                    b.succeeded()  # the server answered; whether the watch works is the watch's own backoff
                    yield typ, {"timeoutSeconds": timeout}
                else:
                    yield typ, obj
        except Unavailable as exc:
            if not opened:  # not answered: a server failure; a stream broken later is the watch's own
                b.failed(exc, exc.retry_after)
            raise

    def delete(self, kind: Kind, name: str, namespace: str | None = None) -> None:
        res = _resource(kind)
        if kind.namespaced:
            self._call(f"delete {kind.kind} {name}", lambda: self._client.delete(res, name, namespace=namespace))
        else:
            self._call(f"delete {kind.kind} {name}", lambda: self._client.delete(res, name))
