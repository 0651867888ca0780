"""The API's routes as one plain ASGI callable: exact paths, HEAD on every GET route, 404, 405 with ``Allow``,
500 on a bug, and blocking work in a thread pool.

A framework added nothing the routes use (no request bodies, no middleware, no schema) and cost resident
memory on every node (Starlette and anyio, about 2 MiB measured by ``benchmarks/serve.py``). The answers keep
the framework's framing: text answers are ``text/plain; charset=utf-8``, JSON is compact UTF-8, a 404 says
``Not Found`` and a 405 ``Method Not Allowed``; a HEAD answer carries the GET's headers and no body.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar
from urllib.parse import parse_qsl

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

T = TypeVar("T")

WORKERS = 40  # threads for blocking work at most (the thread limit Starlette's pool had), started as needed
TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"
JSON = "application/json"


class Answer(NamedTuple):
    status: int
    body: bytes = b""
    content_type: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


def text(body: str, status: int = 200, headers: Mapping[str, str] | None = None, *,
         content_type: str = TEXT) -> Answer:
    return Answer(status, body.encode(), content_type, tuple((headers or {}).items()))


def data(body: bytes | str, content_type: str, status: int = 200, headers: Mapping[str, str] | None = None) -> Answer:
    raw = body.encode() if isinstance(body, str) else body
    return Answer(status, raw, content_type, tuple((headers or {}).items()))


def json_answer(doc: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Answer:
    body = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return data(body, JSON, status, headers)


class Request:
    """What a route reads of a request: its method, path parameter, headers and query."""

    __slots__ = ("_pool", "method", "param", "scope")

    def __init__(self, scope: Scope, param: str, pool: ThreadPoolExecutor) -> None:
        self.scope, self.param, self._pool = scope, param, pool
        self.method: str = scope["method"]

    def header(self, name: str) -> str | None:
        """The first field of that name (latin-1, as HTTP carries it), or None."""
        key = name.lower().encode("latin-1")
        return next((v.decode("latin-1") for k, v in self.scope.get("headers", ()) if k == key), None)

    def query(self) -> dict[str, str]:
        """The query parameters; a repeated one keeps its last value."""
        return dict(parse_qsl(self.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))

    async def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread, off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)


Handler = Callable[[Request], Awaitable[Answer]]


class Route(NamedTuple):
    path: str  # exact, or with ``param`` a prefix ending in "/" and one path segment after it
    endpoint: Handler
    methods: frozenset[str] = frozenset({"GET", "HEAD"})
    param: bool = False


async def send_answer(send: Send, answer: Answer, *, head: bool) -> None:
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers]
    if not (answer.status < 200 or answer.status in (204, 304)):
        headers.append((b"content-length", str(len(answer.body)).encode()))
    if answer.content_type is not None:
        headers.append((b"content-type", answer.content_type.encode("latin-1")))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else answer.body})


class Router:
    """The ASGI app: the route for a path and method, or 404 / 405."""

    def __init__(self, routes: Iterable[Route], workers: int = WORKERS) -> None:
        self.routes = list(routes)
        self._exact = {r.path: r for r in self.routes if not r.param}
        self._prefixed = [r for r in self.routes if r.param]
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="http-worker")

    def _match(self, path: str) -> tuple[Route | None, str]:
        found = self._exact.get(path)
        if found is not None:
            return found, ""
        for r in self._prefixed:
            rest = path[len(r.path):] if path.startswith(r.path) else ""
            if rest and "/" not in rest:
                return r, rest
        return None, ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # uvicorn runs with lifespan off; a test client may still ask
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        route, param = self._match(scope["path"])
        method = scope["method"]
        head = method == "HEAD"
        if route is None:
            await send_answer(send, text("Not Found", 404), head=head)
            return
        if method not in route.methods:
            allow = ", ".join(sorted(route.methods))
            await send_answer(send, text("Method Not Allowed", 405, {"Allow": allow}), head=head)
            return
        try:
            answer = await route.endpoint(Request(scope, param, self.pool))
        except Exception:  # a bug: say so, then let the server log it
            await send_answer(send, text("Internal Server Error", 500), head=head)
            raise
        await send_answer(send, answer, head=head)
