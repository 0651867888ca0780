"""The HTTP API: metrics, health, the snapshot as JSON/DOT/SVG/text, the page, and probes on demand.

Imported only by ``topolink serve``. Every response is built from the current :class:`View`; what is
costly to build (JSON, DOT, SVG, matrices, the exposition and its gzip) is built once per view generation.
A bad request gets a 4xx (the server answers an oversized head with 431 before the app sees it). Every GET
route answers HEAD with the same headers and no body.

A plain ASGI callable (``_asgi``), no framework: the routes take no request bodies to validate and publish
no schema. FastAPI's pydantic added about 15 MiB to the agent's resident memory on every node, Starlette and
anyio about 2 MiB more (measured, ``benchmarks/serve.py``).
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from topology import dumps, matrix, shown_text

from .._core._view import View
from .._metrics._exposition import MetricsCache
from ._asgi import HTML, JSON, Answer, Request, Route, Router, data, json_answer, text
from ._negotiate import OPENMETRICS, TEXT, accepts_gzip, etag_matches, negotiate_metrics

if TYPE_CHECKING:
    from .._placement._placement_api import PlacementCache
    from .._webpage._picture import Svg


class ProbeControl(Protocol):
    def start(self) -> str | None:
        """Start a probe pass now; its id, or None while one runs."""

    def status(self, run_id: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpConfig:
    probe_token: str | None = None  # None: POST /v1/probe is off
    dot_timeout_s: float = 10.0
    measured_matrix: Callable[[Any], str] = lambda snap: ""  # the measured matrices of a snapshot, as text


def _header(request: Request, name: bytes) -> str | None:
    found = [v.decode("latin-1") for k, v in request.scope.get("headers", ()) if k == name]
    return ", ".join(found) if found else None  # repeated fields are one comma-separated list (RFC 9110 5.3)


class MetricsEndpoint:
    """Text or OpenMetrics by ``Accept``; gzip when ``Accept-Encoding`` asks (Prometheus does). On the event
    loop: the bytes are built once per view."""

    def __init__(self, cache: MetricsCache) -> None:
        self._cache = cache

    async def __call__(self, request: Request) -> Answer:
        ctype = negotiate_metrics(_header(request, b"accept"))
        vary = ("vary", "Accept, Accept-Encoding")
        if ctype is None:
            return Answer(406, b"not acceptable: text/plain or application/openmetrics-text\n", TEXT, (vary,))
        gzipped = accepts_gzip(_header(request, b"accept-encoding"))
        body = self._cache.body(openmetrics=ctype == OPENMETRICS, gzipped=gzipped)
        return Answer(200, body, ctype, (vary, ("content-encoding", "gzip")) if gzipped else (vary,))


class _Renders:
    """What is built once per view generation."""

    def __init__(self, config: HttpConfig) -> None:
        self._config = config
        self._lock = threading.Lock()
        self._gen = -1
        self._made: dict[str, Any] = {}

    def get(self, view: View, what: str) -> Any:
        with self._lock:
            if view.generation != self._gen:
                self._gen, self._made = view.generation, {}
            if what in self._made:
                return self._made[what]
        value = self._make(view, what)
        with self._lock:
            if view.generation == self._gen:
                self._made[what] = value
        return value

    def _make(self, view: View, what: str) -> Any:
        snap = view.snapshot
        if what == "json":
            body = dumps(snap).encode()
            return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        if what == "dot":
            from .._webpage._picture import picture_dot  # the picture's modules on its first ask, not in every agent

            return picture_dot(snap)
        if what == "svg":
            from .._webpage._picture import render_svg

            return render_svg(self.get(view, "dot"), timeout_s=self._config.dot_timeout_s)
        if what == "matrix":
            measured = self._config.measured_matrix(snap)
            text = (matrix(snap) or "No GPU or RDMA NIC on this node.\n") + ("\n" + measured if measured else "")
            return text if text.endswith("\n") else text + "\n"
        if what == "measured":
            return self._config.measured_matrix(snap)
        raise KeyError(what)  # pragma: no cover - a programming error


def readiness(view: View | None) -> tuple[int, str]:
    """``/readyz``: 503 until the first snapshot and while NVML does not answer on a node with NVIDIA GPUs
    (saying why); then 200, with every degradation named on its own line.
    An unwritable state directory degrades but does not unready: the agent still serves true facts, and an
    unready pod would leave its Service and stall a DaemonSet rollout on exactly the node to look at."""
    if view is None:
        return 503, "not ready: the first discovery pass is running\n"
    if view.not_ready:  # NVML not answering while GPUs are on the bus: the node's facts are not whole yet
        return 503, f"not ready: {shown_text(view.not_ready)}\n"  # NVML's words, one line
    lines = [f"degraded: {shown_text(why)}" for why in view.degradations]
    return 200, "\n".join(["ready" + (" (degraded)" if lines else ""), *lines]) + "\n"


class _SnapshotApi:
    """The snapshot's renderings and the page: 503 until the first snapshot, each rendering built once per
    view generation in the thread pool (``dot`` and its ``svg`` may run for seconds). The page's, the picture's
    and placement's modules load on the first request that needs them: most agents are only scraped."""

    def __init__(self, current: Callable[[], View | None], renders: _Renders) -> None:
        self._current = current
        self._renders = renders
        self._lock = threading.Lock()
        self._placement_cache: PlacementCache | None = None

    def _placements(self) -> PlacementCache:
        with self._lock:
            if self._placement_cache is None:
                from .._placement._placement_api import PlacementCache

                self._placement_cache = PlacementCache()
            return self._placement_cache

    def view_or_503(self) -> View | Answer:
        view = self._current()
        if view is None:
            return text("no snapshot yet: the first discovery pass is running\n", 503)
        return view

    async def topology_json(self, request: Request) -> Answer:
        got = self.view_or_503()
        if isinstance(got, Answer):
            return got
        body, etag = await request.in_thread(self._renders.get, got, "json")
        if etag_matches(request.header("if-none-match"), etag):
            return Answer(304, headers=(("etag", etag),))
        return data(body, JSON, headers={"etag": etag})

    async def topology_matrix(self, request: Request) -> Answer:
        got = self.view_or_503()
        if isinstance(got, Answer):
            return got
        return text(await request.in_thread(self._renders.get, got, "matrix"))

    async def topology_dot(self, request: Request) -> Answer:
        got = self.view_or_503()
        if isinstance(got, Answer):
            return got
        return data(await request.in_thread(self._renders.get, got, "dot"), "text/vnd.graphviz; charset=utf-8")

    async def topology_svg(self, request: Request) -> Answer:
        got = self.view_or_503()
        if isinstance(got, Answer):
            return got
        svg: Svg = await request.in_thread(self._renders.get, got, "svg")
        if svg.svg is None:
            return text(f"no picture: {svg.reason}\n", 503)
        return data(svg.svg, "image/svg+xml")

    async def placement(self, request: Request) -> Answer:
        got = self.view_or_503()
        if isinstance(got, Answer):
            return got
        status, doc, headers = await request.in_thread(self._place, got, request.query())
        return json_answer(doc, status, headers)

    async def index(self, request: Request) -> Answer:
        got = self.view_or_503()
        if isinstance(got, Answer):
            return got
        return text(await request.in_thread(self._page, got), content_type=HTML)

    def _place(self, view: View, query: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]]:
        from .._placement._placement_api import placement_reply

        return placement_reply(self._placements(), view, query)

    def _page(self, view: View) -> str:
        from .._webpage._page import INLINE_TREE_GPUS, page
        from .._webpage._picture import Svg

        big = len(view.snapshot.gpus) > INLINE_TREE_GPUS  # the page links the tree instead: no dot run
        svg: Svg = Svg(None, "linked") if big else self._renders.get(view, "svg")
        return page(view, now=time.time(), svg=svg.svg, svg_reason=svg.reason,
                    measured_matrix=self._renders.get(view, "measured"),
                    placements=self._placements().page_groups(view))

    def routes(self) -> list[Route]:
        return [Route("/v1/topology", self.topology_json), Route("/v1/topology/matrix", self.topology_matrix),
                Route("/v1/topology.dot", self.topology_dot), Route("/v1/topology.svg", self.topology_svg),
                Route("/v1/placement", self.placement), Route("/", self.index)]


class _ProbeApi:
    """``POST /v1/probe`` (behind the bearer token) and its status, in the thread pool: they take the agent's
    lock."""

    def __init__(self, probes: ProbeControl | None, config: HttpConfig) -> None:
        self._probes, self._config = probes, config

    async def start(self, request: Request) -> Answer:
        return await request.in_thread(self._start, request.header("authorization") or "")

    async def status(self, request: Request) -> Answer:
        return await request.in_thread(self._status, request.param)

    def _start(self, given: str) -> Answer:
        probes, token = self._probes, self._config.probe_token
        if probes is None or token is None:
            return json_answer({"detail": "probes over HTTP are off (serve --http-probe-token-file)"}, 403)
        scheme, _, offered = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(offered.strip().encode(), token.encode()):
            return json_answer({"detail": "a valid bearer token is needed"}, 401, {"WWW-Authenticate": "Bearer"})
        run_id = probes.start()
        if run_id is None:
            return json_answer({"detail": "a probe pass is running; try again when it ends"}, 409)
        url = f"/v1/probe/{run_id}"
        return json_answer({"id": run_id, "status_url": url}, 202, {"Location": url})

    def _status(self, run_id: str) -> Answer:
        found = self._probes.status(run_id) if self._probes is not None else None
        if found is None:
            return json_answer({"detail": f"no probe run {run_id!r}"}, 404)
        return json_answer(found)

    def routes(self) -> list[Route]:
        return [Route("/v1/probe", self.start, frozenset({"POST"})), Route("/v1/probe/", self.status, param=True)]


async def _healthz(request: Request) -> Answer:
    return text("ok\n")


def create_app(current: Callable[[], View | None], cache: MetricsCache, config: HttpConfig,
               probes: ProbeControl | None = None) -> Router:
    """The API as an ASGI app. Exact paths (no redirect: a scraper that does not follow redirects loses
    nothing); every GET route answers HEAD too."""

    async def readyz(request: Request) -> Answer:
        status, body = readiness(current())
        return text(body, status)

    return Router([Route("/metrics", MetricsEndpoint(cache)), Route("/healthz", _healthz), Route("/readyz", readyz),
                   *_SnapshotApi(current, _Renders(config)).routes(),
                   *_ProbeApi(probes, config).routes()])
