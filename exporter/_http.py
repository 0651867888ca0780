"""The HTTP API (FastAPI): metrics, health, the snapshot as JSON/DOT/SVG/text, the page, and probes on demand.

Imported only by ``topolink serve``. Every response is built from the current :class:`View`; what is
costly to build (JSON, DOT, SVG, matrices) is built once per view generation. A bad request gets a 4xx.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from topology import dumps, matrix

from ._metrics import MetricsCache
from ._page import page
from ._picture import Svg, picture_dot, render_svg
from ._view import View

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


class ProbeControl(Protocol):
    def start(self) -> str | None:
        """Start a probe pass now; its id, or None while one runs."""

    def status(self, run_id: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpConfig:
    probe_token: str | None = None  # None: POST /v1/probe is off
    dot_timeout_s: float = 10.0
    measured_matrix: Callable[[Any], str] = lambda snap: ""  # the measured matrices of a snapshot, as text


def _media_types(accept: str) -> list[str]:
    return [part.split(";", 1)[0].strip().lower() for part in accept.split(",") if part.strip()]


def negotiate_metrics(accept: str | None) -> str | None:
    """The content type for an ``Accept`` header; None when it accepts nothing we serve (406)."""
    if not accept:
        return TEXT
    types = _media_types(accept)
    if "application/openmetrics-text" in types:
        return OPENMETRICS
    if any(t in ("text/plain", "text/*", "*/*") for t in types):
        return TEXT
    return None


class MetricsEndpoint:
    """Raw ASGI: Starlette's ``Route`` passes an object through as an app, so ``/metrics`` is exact."""

    def __init__(self, cache: MetricsCache) -> None:
        self._cache = cache

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        accept = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"accept"), None)
        ctype = negotiate_metrics(accept)
        if ctype is None:
            body, status, ctype = b"not acceptable: text/plain or application/openmetrics-text\n", 406, TEXT
        else:
            rendered = self._cache.exposition()
            body, status = (rendered.openmetrics if ctype == OPENMETRICS else rendered.text), 200
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class HeaderLimit:
    """431 for a request whose headers exceed ``limit`` bytes, before any route sees it."""

    def __init__(self, app: ASGIApp, limit: int = 16 * 1024) -> None:
        self._app, self._limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and sum(len(k) + len(v) for k, v in scope.get("headers", ())) > self._limit:
            body = b"request headers too large\n"
            await send({"type": "http.response.start", "status": 431,
                        "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, send)


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
            return picture_dot(snap)
        if what == "svg":
            return render_svg(self.get(view, "dot"), timeout_s=self._config.dot_timeout_s)
        if what == "matrix":
            measured = self._config.measured_matrix(snap)
            text = (matrix(snap) or "No GPU or RDMA NIC on this node.\n") + ("\n" + measured if measured else "")
            return text if text.endswith("\n") else text + "\n"
        if what == "measured":
            return self._config.measured_matrix(snap)
        raise KeyError(what)  # pragma: no cover - a programming error


def create_app(current: Callable[[], View | None], cache: MetricsCache, config: HttpConfig,
               probes: ProbeControl | None = None) -> FastAPI:
    app = FastAPI(title="topolink", docs_url=None, redoc_url=None, openapi_url=None)
    app.router.redirect_slashes = False  # exact paths: a scraper that does not follow redirects loses nothing
    app.add_middleware(HeaderLimit)
    renders = _Renders(config)
    app.router.routes.append(Route("/metrics", MetricsEndpoint(cache), methods=["GET"]))

    def view_or_503() -> View | Response:
        view = current()
        if view is None:
            return PlainTextResponse("no snapshot yet: the first discovery pass is running\n", status_code=503)
        return view

    @app.get("/healthz", response_class=PlainTextResponse)
    def healthz() -> str:
        return "ok\n"

    @app.get("/readyz")
    def readyz() -> Response:
        got = view_or_503()
        if isinstance(got, Response):
            return got
        if got.not_ready:  # say why: NVML not answering while GPUs are on the bus
            return PlainTextResponse(f"not ready: {got.not_ready}\n", status_code=503)
        return PlainTextResponse("ready\n")

    @app.get("/v1/topology")
    async def topology_json(request: Request) -> Response:
        got = view_or_503()
        if isinstance(got, Response):
            return got
        body, etag = await run_in_threadpool(renders.get, got, "json")
        match = request.headers.get("if-none-match", "")
        if etag in [t.strip() for t in match.split(",")] or match.strip() == "*":
            return Response(status_code=304, headers={"ETag": etag})
        return Response(body, media_type="application/json", headers={"ETag": etag})

    @app.get("/v1/topology/matrix")
    async def topology_matrix() -> Response:
        got = view_or_503()
        if isinstance(got, Response):
            return got
        return PlainTextResponse(await run_in_threadpool(renders.get, got, "matrix"))

    @app.get("/v1/topology.dot")
    async def topology_dot() -> Response:
        got = view_or_503()
        if isinstance(got, Response):
            return got
        text = await run_in_threadpool(renders.get, got, "dot")
        return Response(text, media_type="text/vnd.graphviz; charset=utf-8")

    @app.get("/v1/topology.svg")
    async def topology_svg() -> Response:
        got = view_or_503()
        if isinstance(got, Response):
            return got
        svg: Svg = await run_in_threadpool(renders.get, got, "svg")
        if svg.svg is None:
            return PlainTextResponse(f"no picture: {svg.reason}\n", status_code=503)
        return Response(svg.svg, media_type="image/svg+xml")

    @app.get("/", response_class=HTMLResponse)
    async def index() -> Response:
        got = view_or_503()
        if isinstance(got, Response):
            return got
        view = got

        def build() -> str:
            svg: Svg = renders.get(view, "svg")
            return page(view, now=time.time(), svg=svg.svg, svg_reason=svg.reason,
                        measured_matrix=renders.get(view, "measured"))

        return HTMLResponse(await run_in_threadpool(build))

    @app.post("/v1/probe")
    def start_probe(request: Request) -> Response:
        if probes is None or config.probe_token is None:
            return JSONResponse({"detail": "probes over HTTP are off (serve --http-probe-token-file)"}, 403)
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), config.probe_token.encode()):
            return JSONResponse({"detail": "a valid bearer token is needed"}, 401,
                                headers={"WWW-Authenticate": "Bearer"})
        run_id = probes.start()
        if run_id is None:
            return JSONResponse({"detail": "a probe pass is running; try again when it ends"}, 409)
        url = f"/v1/probe/{run_id}"
        return JSONResponse({"id": run_id, "status_url": url}, 202, headers={"Location": url})

    @app.get("/v1/probe/{run_id}")
    def probe_status(run_id: str) -> Response:
        found = probes.status(run_id) if probes is not None else None
        if found is None:
            return JSONResponse({"detail": f"no probe run {run_id!r}"}, 404)
        return JSONResponse(found)

    return app
