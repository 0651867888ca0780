"""``topolink serve``: the node agent's command line. Every flag has a ``TOPOLINK_*`` environment variable.

Exit status: 0 stopped by SIGTERM or SIGINT; 1 the HTTP server could not start (address in use); 2 usage
(a missing or unreadable --kubeconfig too).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from exporter import Sink
    from exporter.kube import KubePublishConfig
    from topology import Snapshot

_EPILOG = ("Probes measure this machine only: with a --sysfs-root that is a gathered tree (not this kernel's "
           "sysfs and procfs mounted there, as the DaemonSet's /host is) or an --nvml-library given as a file path "
           "(a machine profile's test NVML) the agent serves that tree and runs no probe, as topolink probe "
           "refuses there, and --http-probe-token-file is a usage error. Signals: SIGHUP rediscovers now; SIGTERM or "
           "SIGINT stops probes (their process groups are killed) and "
           "exits 0. Exit status: 0 stopped by a signal; 1 the HTTP server could not start; 2 usage or no readable "
           "kubeconfig.")


def add_parsers(sub: Any, add_discovery_args: Callable[[argparse.ArgumentParser], None],
                environ: Mapping[str, str] | None = None) -> None:
    """Add ``serve`` to the ``topolink`` subcommands."""
    from exporter._core._http_flags import add_http_args
    from exporter._core._settings import PATH, PORT, TEXT, Choice, count, env_value, seconds
    from exporter.kube import add_kube_args

    s = sub.add_parser("serve", help="run the node agent: discovery, probes, metrics and the HTTP API",
                       description="The node agent: discovers on an interval and on SIGHUP, probes idle GPUs on "
                                   "a schedule with a duty-cycle bound, keeps state across restarts, serves "
                                   "Prometheus metrics and an HTTP API with a picture of the node.",
                       epilog=_EPILOG)

    def default(name: str, rule: Any, value: object) -> Any:
        return env_value(environ, f"TOPOLINK_{name}", rule, value)

    log_formats = Choice("text", "json")
    s.add_argument("--host", type=TEXT, default=default("HOST", TEXT, "0.0.0.0"),
                   help="address to listen on ($TOPOLINK_HOST, default 0.0.0.0)")
    s.add_argument("--port", type=PORT, default=default("PORT", PORT, 9402),
                   help="TCP port, 0 for any free one ($TOPOLINK_PORT, default 9402)")
    interval = seconds()
    s.add_argument("--discovery-interval", type=interval, metavar="SECONDS",
                   default=default("DISCOVERY_INTERVAL", interval, 60.0),
                   help="seconds between discovery passes ($TOPOLINK_DISCOVERY_INTERVAL, default 60)")
    _add_probe_args(s, default)
    s.add_argument("--state-dir", type=PATH, default=default("STATE_DIR", PATH, PATH.parse("/var/lib/topolink")),
                   help="where the last complete snapshot and probe report are kept ($TOPOLINK_STATE_DIR, "
                        "default /var/lib/topolink)")
    s.add_argument("--log-format", choices=log_formats.choices,
                   default=default("LOG_FORMAT", log_formats, "text"),
                   help="one line per event ($TOPOLINK_LOG_FORMAT, default text)")
    s.add_argument("--http-probe-token-file", type=PATH, metavar="FILE",
                   default=default("HTTP_PROBE_TOKEN_FILE", PATH, None),
                   help="turns POST /v1/probe on, with the bearer token in FILE ($TOPOLINK_HTTP_PROBE_TOKEN_FILE; "
                        "default off)")
    dot = seconds(high=3600)
    s.add_argument("--dot-timeout", type=dot, metavar="SECONDS", default=default("DOT_TIMEOUT", dot, 10.0),
                   help="time limit for Graphviz to draw the picture ($TOPOLINK_DOT_TIMEOUT, default 10)")
    pairs = count(0, 1 << 40)
    s.add_argument("--metrics-pair-series-limit", type=pairs, metavar="SERIES",
                   default=default("METRICS_PAIR_SERIES_LIMIT", pairs, 50_000),
                   help="most series of the pair families (GPU pairs, GPU x RDMA NIC pairs, NUMA distances) /metrics "
                        "holds: above it none of them is published (topolink_metrics_pair_series_withheld says how "
                        "many); 0: never ($TOPOLINK_METRICS_PAIR_SERIES_LIMIT, default 50000: every node up to the "
                        "NIC limit, not 256 GPUs)")
    add_http_args(s, environ)
    s.add_argument("--print-metrics", action="store_true", help="print the table of metric families and exit")
    add_discovery_args(s)
    add_kube_args(s, node_name=False, environ=environ)  # discovery's --node-name ($NODE_NAME) names our node
    s.set_defaults(handler=_cmd_serve, node_name=env_value(environ, "NODE_NAME", TEXT, None))


def _add_probe_args(s: argparse.ArgumentParser, default: Callable[[str, Any, object], Any]) -> None:
    """The probe schedule and what each pass runs."""
    from exporter._core._settings import NAMES, TEXT, Choice, Number, seconds

    profiles, backends = Choice("quick", "full", "selftest"), Choice("auto", "cuda", "cpu")
    probe_interval = seconds(low_open=False)
    s.add_argument("--probe-interval", type=probe_interval, metavar="SECONDS",
                   default=default("PROBE_INTERVAL", probe_interval, 86400.0),
                   help="seconds between scheduled probe passes; 0 turns scheduled probes off "
                        "($TOPOLINK_PROBE_INTERVAL, default 86400: once after start, then daily)")
    ratio = Number(0, 1, low_open=True, unit="a fraction of wall time")
    s.add_argument("--probe-duty-cycle", type=ratio, metavar="RATIO", default=default("PROBE_DUTY_CYCLE", ratio, 0.01),
                   help="most of wall time spent probing ($TOPOLINK_PROBE_DUTY_CYCLE, default 0.01)")
    s.add_argument("--probe-profile", choices=profiles.choices,
                   default=default("PROBE_PROFILE", profiles, "quick"),
                   help="probe sizes ($TOPOLINK_PROBE_PROFILE, default quick)")
    timings = Choice("graph", "stream")
    s.add_argument("--probe-collective-timing", choices=timings.choices,
                   default=default("PROBE_COLLECTIVE_TIMING", timings, None),
                   help="how the NCCL collectives are timed: graph (nccl-tests -G 1, the profile's own) or stream "
                        "(nccl-tests -G 0) ($TOPOLINK_PROBE_COLLECTIVE_TIMING)")
    s.add_argument("--probe-backend", choices=backends.choices,
                   default=default("PROBE_BACKEND", backends, "auto"),
                   help="auto: cuda when there are GPUs and CuPy, else cpu ($TOPOLINK_PROBE_BACKEND)")
    s.add_argument("--probe-tests", type=TEXT, nargs="+", metavar="NAME", default=default("PROBE_TESTS", NAMES, None),
                   help="only these tests ($TOPOLINK_PROBE_TESTS, comma separated; default all)")
    item = seconds()
    s.add_argument("--probe-item-timeout", type=item, metavar="SECONDS",
                   default=default("PROBE_ITEM_TIMEOUT", item, None),
                   help="cap on each probe item's wall-time budget ($TOPOLINK_PROBE_ITEM_TIMEOUT; default the plan's)")


def build_sinks(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> list[Sink]:
    """The Kubernetes sinks the flags ask for (``publish_config``)."""
    return sinks_for(publish_config(args, env))


def sinks_for(cfg: KubePublishConfig) -> list[Sink]:
    from exporter.kube import sinks_from_config

    return [] if cfg.labels_via == "none" and not cfg.needs_api else sinks_from_config(cfg)


def publish_config(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> KubePublishConfig:
    """What the flags ask to publish. Outside a cluster (no service account environment, no kubeconfig)
    nothing is published through the API: serve then runs as a local agent, and says so."""
    import dataclasses

    from exporter.kube import config_from_args

    cfg = config_from_args(args, env)
    reachable = bool(env.get("KUBERNETES_SERVICE_HOST") or cfg.kubeconfig or env.get("KUBECONFIG"))
    if cfg.needs_api and not reachable:
        print("topolink serve: no Kubernetes API (not in a cluster, no --kubeconfig): labels and ResourceSlices "
              "are not published", file=sys.stderr)
        cfg = dataclasses.replace(cfg, labels_via="none" if cfg.labels_via != "file" else "file",
                                  resource_slices=False, device_taint_rules=False)
    return cfg


def start_preflight(args: argparse.Namespace, cfg: KubePublishConfig, on_this_machine: bool) -> None:
    """Doctor's checks for what serve was asked to do, in a thread (serving never waits on them): each thing
    missing logged once, one line with its fix. A warning, not an exit: the agent serves and publishes when
    the fix arrives."""
    import logging
    import threading

    from ..serve import LOGGER, event, setup_log
    from ._checks import preflight

    setup_log(args.log_format)

    def check() -> None:
        log = logging.getLogger(LOGGER)
        try:
            missing = preflight(cfg, args.nvml_library, node=on_this_machine)
        except Exception as exc:  # a check's bug must not take the agent down: it only warns
            event(log, "preflight failed", logging.ERROR, error=f"{type(exc).__name__}: {exc}")
            return
        for f in missing:
            event(log, "preflight: missing", logging.WARNING, check=f.check, detail=f.detail, fix=f.fix)

    threading.Thread(target=check, name="preflight", daemon=True).start()


def _probe_token(path: Path | None) -> str | None:
    """The bearer token in ``--http-probe-token-file``; ValueError, saying why, when unreadable or empty."""
    if path is None:
        return None
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ValueError(f"--http-probe-token-file: {exc}") from None
    if not token:
        raise ValueError("--http-probe-token-file is empty")
    return token


def _cmd_serve(args: argparse.Namespace) -> int:
    from exporter import metrics_markdown

    if args.print_metrics:
        sys.stdout.write(metrics_markdown())
        return 0
    from exporter import limits_from_args

    try:
        token = _probe_token(args.http_probe_token_file)
        http = limits_from_args(args)
    except ValueError as exc:
        print(f"topolink serve: {exc}", file=sys.stderr)
        return 2
    from ._common import discover_from_args, fixture_reason, version

    probes_off = fixture_reason(args)  # probe's own decision: a fixture is served, never measured
    if probes_off is not None and token is not None:
        print(f"topolink serve: --http-probe-token-file: refusing to measure: {probes_off}", file=sys.stderr)
        return 2
    from ..serve import ServeConfig, nvml_busy, run

    config = ServeConfig(host=args.host, port=args.port, discovery_interval_s=args.discovery_interval,
                         probe_interval_s=0 if probes_off else args.probe_interval, duty_cycle=args.probe_duty_cycle,
                         probe_profile=args.probe_profile, probe_backend=args.probe_backend,
                         probe_collective_timing=args.probe_collective_timing,
                         probe_tests=tuple(args.probe_tests) if args.probe_tests else None,
                         probe_item_timeout_s=args.probe_item_timeout, state_dir=args.state_dir,
                         log_format=args.log_format, probe_token=token, dot_timeout_s=args.dot_timeout,
                         metrics_pair_series_limit=args.metrics_pair_series_limit, version=version(), http=http,
                         probes_off=probes_off)
    from exporter.kube import BadConfig

    try:
        cfg = publish_config(args)
        sinks = sinks_for(cfg)
    except (BadConfig, ValueError) as exc:  # an unreadable --kubeconfig, no node name: usage, no traceback
        print(f"topolink serve: {exc}", file=sys.stderr)
        return 2
    start_preflight(args, cfg, probes_off is None)
    return run(config, lambda: discover_from_args(args), nvml_busy(args.nvml_library), sinks,
               _measured_matrix)


def _measured_matrix(snap: Snapshot) -> str:
    """The page's and /v1/topology/matrix's measured matrices: the probes' renderer, loaded on the first ask."""
    from probes import render_bandwidth_matrix

    return render_bandwidth_matrix(snap)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agent.cli.serve``: the ``serve`` command on its own."""
    from exporter._core._settings import SettingError

    from ._common import add_discovery_args

    parser = argparse.ArgumentParser(prog="topolink", exit_on_error=False)
    try:
        sub = parser.add_subparsers(dest="command", required=True)
        add_parsers(sub, add_discovery_args)
        sub.choices["serve"].exit_on_error = False
        args = parser.parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    except (SettingError, argparse.ArgumentError) as exc:  # one line, as ``topolink serve`` says it
        print(f"topolink serve: {exc}", file=sys.stderr)
        return 2
    result: int = args.handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
