"""The agent's threads and signals: discovery and probe loops, uvicorn in a thread, SIGHUP, SIGTERM and SIGINT."""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, Protocol

from exporter import Sink, WatchingSink
from topology import Snapshot

from ._agent import Agent
from ._config import ServeConfig
from ._log import event, setup
from ._probe import Busy, kill_children, next_probe_at
from ._wake import Wake

_STOP_GRACE_S = 4.0  # SIGTERM to exit: within the 5 s a DaemonSet's pod is given at the least


def discovery_loop(agent: Agent, wake: Wake) -> None:
    """The sync worker: discovery on its interval (sooner while NVML does not answer) and when woken for it; between
    passes, a resync of the sinks whose watch asked (publishing the last snapshot again, no discovery)."""
    why = "start"
    while not agent.stopping.is_set():
        agent.discover_once(why)
        _return_free_memory()
        due = time.monotonic() + agent.next_discovery_in()
        while not agent.stopping.is_set():
            why, resync = wake.wait(max(0.0, due - time.monotonic()))
            if why:
                break
            agent.resync(resync)


def watch_loop(agent: Agent, sink: WatchingSink, wake: Wake, *, first_s: float = 1.0, cap_s: float = 300.0) -> None:
    """Runs the sink's watch until the agent stops; a watch that fails on a bug is run again after a back-off
    (``first_s`` doubling to ``cap_s``, jittered over its upper half), the sink publishing every pass meanwhile."""
    failures = 0
    while not agent.stopping.is_set():
        try:
            sink.watch(agent.stopping, functools.partial(wake.resync, sink.name))
        except Exception as exc:  # a bug here must not take the agent down, nor stop the watch for good
            failures += 1
            window = min(cap_s, first_s * 2 ** min(failures, 30))
            wait = random.uniform(window / 2, window)
            event(agent.log, "watch failed", logging.ERROR, sink=sink.name, error=f"{type(exc).__name__}: {exc}",
                  next_try_s=round(wait, 1))
            agent.stopping.wait(wait)


def probe_loop(agent: Agent) -> None:
    try:
        _probe_loop(agent)
    except Exception as exc:  # a bug here must not take the agent down: it serves without probes
        event(agent.log, "probe loop failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")


def _probe_loop(agent: Agent) -> None:
    cfg = agent.config
    if cfg.probes_off is not None:
        return
    scheduled = cfg.probe_interval_s > 0
    next_at = time.monotonic()  # the first pass: as soon as there is a snapshot and the GPUs are idle
    while not agent.stopping.is_set():
        requested = agent.probe_wake.wait(max(0.0, min(next_at - time.monotonic(), 1.0)) if scheduled else 1.0)
        agent.probe_wake.clear()
        if agent.stopping.is_set():
            return
        if not requested and (not scheduled or time.monotonic() < next_at):
            continue
        if not requested and not agent.gpus_idle():
            event(agent.log, "probe pass postponed", reason="a GPU is in use")
            next_at = time.monotonic() + cfg.discovery_interval_s
            continue
        started = time.monotonic()
        if not agent.probe_once("request" if requested else "schedule"):
            next_at = time.monotonic() + 1.0
            continue
        if not requested or scheduled:
            next_at = next_probe_at(started, time.monotonic(), cfg.probe_interval_s, cfg.duty_cycle)


class _HttpProbes:
    """``POST /v1/probe``: one pass at a time, run by the probe thread."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent

    def start(self) -> str | None:
        return self._agent.probe_start()

    def status(self, run_id: str) -> dict[str, Any] | None:
        return self._agent.probe_status(run_id)


@functools.cache
def _libc() -> Any:
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def _few_malloc_arenas() -> None:
    """glibc gives each thread that allocates its own arena (up to 8 per core), and the server's threads
    each keep megabytes there; two arenas keep the resident size near what the objects need. Elsewhere
    (musl, macOS) there is nothing to tune."""
    m_arena_max = -8
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(m_arena_max, 2)


def _return_free_memory() -> None:
    """A discovery pass allocates and frees thousands of small objects; hand the freed pages back (glibc
    keeps them otherwise), so the agent's resident size is what it serves, not its busiest moment."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


class _Exiting(Protocol):
    should_exit: bool  # uvicorn's server: set, it closes its connections and returns from run()


def _bind(config: ServeConfig, log: logging.Logger) -> tuple[socket.socket, str] | None:
    """The listening socket and its address as logged, or None after one line (a port in use)."""
    from exporter import listen

    try:  # bound here, before any thread starts: a port in use is one clear line and exit 1
        sock = listen(config.host, config.port)
    except OSError as exc:
        event(log, "http server could not start", logging.ERROR, address=f"{config.host}:{config.port}",
              error=str(exc))
        return None
    host, port = sock.getsockname()[:2]
    return sock, f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _connection_cap(config: ServeConfig, log: logging.Logger) -> int:
    from exporter import connection_cap

    cap = connection_cap(config.http.max_connections)
    if cap < config.http.max_connections:
        event(log, "connection cap lowered", logging.WARNING, wanted=config.http.max_connections, cap=cap,
              reason="the open-file limit")
    return cap


def _log_sinks_like(log: logging.Logger) -> None:
    sinks_log = logging.getLogger("exporter")  # the sinks' own lines (a watch restarted) in the same format
    sinks_log.handlers[:], sinks_log.propagate = list(log.handlers), False
    sinks_log.setLevel(logging.INFO)


def _on_signals(stop: threading.Event, wake: Wake) -> list[str]:
    """SIGTERM and SIGINT set ``stop``, SIGHUP wakes discovery; the names of the stopping signals, as they come."""
    stopped_by: list[str] = []

    def on_stop(signum: int, frame: FrameType | None) -> None:
        stopped_by.append(signal.Signals(signum).name)
        stop.set()

    def on_hup(signum: int, frame: FrameType | None) -> None:
        wake("SIGHUP")

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, on_hup)
    return stopped_by


def _start_threads(agent: Agent, serve_http: Callable[..., Any], sock: socket.socket, sinks: Sequence[Sink],
                   wake: Wake) -> tuple[threading.Thread, threading.Thread]:
    """The http, discovery, probe and watch threads, started; the http and probe threads, to join."""
    threads = [threading.Thread(target=serve_http, kwargs={"sockets": [sock]}, name="http", daemon=True),
               threading.Thread(target=discovery_loop, args=(agent, wake), name="discovery", daemon=True),
               threading.Thread(target=probe_loop, args=(agent,), name="probes", daemon=True)]
    # Blocked in a read of the API server's stream most of the time: daemon threads, never joined.
    watchers = [threading.Thread(target=watch_loop, args=(agent, s, wake), name=f"watch-{s.name}", daemon=True)
                for s in sinks if isinstance(s, WatchingSink)]
    for t in threads + watchers:
        t.start()
    return threads[0], threads[2]


def _shut_down(agent: Agent, wake: Wake, server: _Exiting, threads: tuple[threading.Thread, threading.Thread],
               stopped_by: list[str], *, sinks: Sequence[Sink]) -> None:
    """Within ``_STOP_GRACE_S``: the loops told to stop, probe children killed, the http and probe threads joined."""
    http, probes = threads
    deadline = time.monotonic() + _STOP_GRACE_S
    log = agent.log
    if stopped_by:
        event(log, "agent stopping", signal=stopped_by[0])
    else:
        event(log, "agent stopping", logging.ERROR, reason="the http server stopped")
    agent.stopping.set()
    wake("stop")
    for sink in sinks:  # a watch waiting to try again returns now; one reading a stream, at its next event
        if isinstance(sink, WatchingSink):
            sink.wake_watch()
    server.should_exit = True
    killed = kill_children()
    probes.join(max(0.0, deadline - time.monotonic() - 1.0))
    killed += kill_children()  # a child started between the first sweep and the stop flag
    http.join(max(0.0, deadline - time.monotonic()))
    event(log, "agent stopped", probe_processes_killed=killed)


def run(config: ServeConfig, discover: Callable[[], Snapshot], busy: Busy, sinks: Sequence[Sink],
        measured_matrix: Callable[[Snapshot], str]) -> int:
    from exporter import HttpConfig, HttpStats, MetricsCache, create_app, http_server

    _few_malloc_arenas()
    log = setup(config.log_format)
    bound = _bind(config, log)
    if bound is None:
        return 1
    sock, address = bound
    cap = _connection_cap(config, log)
    stats = HttpStats()
    _log_sinks_like(log)
    agent = Agent(config, discover, busy, sinks, log=log)
    cache = MetricsCache(lambda: agent.view, stats, config.metrics_pair_series_limit)
    agent.on_view = cache.prime
    app = create_app(lambda: agent.view, cache,
                     HttpConfig(probe_token=config.probe_token, dot_timeout_s=config.dot_timeout_s,
                                measured_matrix=measured_matrix),
                     probes=_HttpProbes(agent) if config.probe_token is not None else None)
    server = http_server(app, dataclasses.replace(config.http, max_connections=cap), stats)
    stop = threading.Event()
    wake = Wake()
    agent.requeue = wake.requeue
    stopped_by = _on_signals(stop, wake)
    event(log, "agent starting", version=config.version, address=address, max_connections=cap,
          discovery_interval_s=config.discovery_interval_s, probe_interval_s=config.probe_interval_s,
          state_dir=str(config.state_dir))
    if config.probes_off is not None:
        event(log, "probes off", reason=config.probes_off)
    http, probes = _start_threads(agent, server.run, sock, sinks, wake)
    code = 0
    while not stop.wait(0.25):
        if not http.is_alive():
            event(log, "http server stopped", logging.ERROR, address=address)
            code = 1
            break
    _shut_down(agent, wake, server, (http, probes), stopped_by, sinks=sinks)
    return code
