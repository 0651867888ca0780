"""Sinks: Prometheus collector, HTTP API, node labels, ResourceSlices, NFD feature file; and the file I/O
(``Target``, ``read_regular``) every file topolink writes or reads back goes through.

``create_app`` (the HTTP API) and ``http_server`` are loaded on first use only: the server needs uvicorn,
which nothing but ``topolink serve`` may import.

Layers, each importing only those below it, private behind the names here: ``_http`` (the routes as a plain
ASGI app, the bounded server, header rules) above ``_metrics`` (the families, collectors and ``/metrics`` bytes),
``_webpage`` (the page and the pictures) and ``kube`` (everything Kubernetes; it imports none of ``_http``,
``_metrics``, ``_webpage``, ``_placement``), above ``_placement`` (which N GPUs for a job: document, table,
HTTP answer), above ``_core`` (the sink protocol, the served view, file I/O, the derived rows and the
health rule, the HTTP limits and flags). import-linter checks the order (pyproject.toml).

Imports: ``topology``; never ``agent`` or ``probes``. Imported by: ``agent``, through the names below (and
``_core._http_flags`` for ``topolink --help``).
"""

from topology._lazy import lazy_names as _lazy_names

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if _TYPE_CHECKING:
    from ._core._files import Target, UnsafeFile, read_regular, write_file
    from ._core._http_flags import add_http_args
    from ._core._http_limits import HttpLimits, HttpStats, limits_from_args
    from ._core._sink import PublishResult, Sink, WatchingSink
    from ._core._view import ProbeStats, SinkStats, View, sink_stats
    from ._http._http import HttpConfig, ProbeControl, create_app, readiness
    from ._http._server import connection_cap, http_server, listen
    from ._metrics._exposition import Exposition, MetricsCache
    from ._metrics._families import FAMILIES, Family, metrics_markdown, series_bound
    from ._metrics._metrics import SnapshotCollector, families
    from ._placement._placement import (
        BusyInfo,
        PlacementQuery,
        QueryError,
        parse_size,
        placement_answer,
        query_from_params,
    )
    from ._placement._placement_text import placement_table
    from ._webpage._page import page
    from ._webpage._picture import Svg, picture_dot, render_svg

__all__ = [
    "FAMILIES",
    "BusyInfo",
    "Exposition",
    "Family",
    "HttpConfig",
    "HttpLimits",
    "HttpStats",
    "MetricsCache",
    "PlacementQuery",
    "ProbeControl",
    "ProbeStats",
    "PublishResult",
    "QueryError",
    "Sink",
    "SinkStats",
    "SnapshotCollector",
    "Svg",
    "Target",
    "UnsafeFile",
    "View",
    "WatchingSink",
    "add_http_args",
    "connection_cap",
    "create_app",
    "families",
    "http_server",
    "limits_from_args",
    "listen",
    "metrics_markdown",
    "page",
    "parse_size",
    "picture_dot",
    "placement_answer",
    "placement_table",
    "query_from_params",
    "read_regular",
    "readiness",
    "render_svg",
    "series_bound",
    "sink_stats",
    "write_file",
]

# Names load on first use: the CLI imports ``exporter.kube`` flags and ``topolink --help`` must not pay for
# prometheus_client, Starlette or a Kubernetes client (only ``topolink serve`` needs them).
_WHERE = {
    'BusyInfo': '_placement._placement',
    'PlacementQuery': '_placement._placement',
    'QueryError': '_placement._placement',
    'parse_size': '_placement._placement',
    'placement_answer': '_placement._placement',
    'placement_table': '_placement._placement_text',
    'query_from_params': '_placement._placement',
    'Exposition': '_metrics._exposition',
    'FAMILIES': '_metrics._families',
    'Family': '_metrics._families',
    'HttpConfig': '_http._http',
    'HttpLimits': '_core._http_limits',
    'HttpStats': '_core._http_limits',
    'MetricsCache': '_metrics._exposition',
    'ProbeControl': '_http._http',
    'ProbeStats': '_core._view',
    'PublishResult': '_core._sink',
    'Sink': '_core._sink',
    'SinkStats': '_core._view',
    'SnapshotCollector': '_metrics._metrics',
    'Svg': '_webpage._picture',
    'Target': '_core._files',
    'UnsafeFile': '_core._files',
    'View': '_core._view',
    'WatchingSink': '_core._sink',
    'add_http_args': '_core._http_flags',
    'connection_cap': '_http._server',
    'create_app': '_http._http',
    'families': '_metrics._metrics',
    'http_server': '_http._server',
    'limits_from_args': '_core._http_limits',
    'listen': '_http._server',
    'metrics_markdown': '_metrics._families',
    'page': '_webpage._page',
    'picture_dot': '_webpage._picture',
    'read_regular': '_core._files',
    'readiness': '_http._http',
    'render_svg': '_webpage._picture',
    'series_bound': '_metrics._families',
    'sink_stats': '_core._view',
    'write_file': '_core._files',
}


__getattr__, __dir__ = _lazy_names(__name__, _WHERE, __all__)
