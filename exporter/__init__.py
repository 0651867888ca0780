"""Sinks: Prometheus collector, HTTP API, node labels, ResourceSlices, NFD feature file; and the file door
(``Target``, ``read_regular``) every file topolink writes or reads back goes through.

``create_app`` (the HTTP API) is loaded on first use only: it needs Starlette, which nothing but
``topolink serve`` may import.
"""

from topology._lazy import lazy_names as _lazy_names

_TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms of start-up; mypy reads the block

if _TYPE_CHECKING:
    from ._exposition import Exposition, MetricsCache
    from ._families import FAMILIES, Family, metrics_markdown, series_bound
    from ._files import Target, UnsafeFile, read_regular, write_file
    from ._http import HttpConfig, ProbeControl, create_app, readiness
    from ._http_flags import add_http_args
    from ._http_limits import HttpLimits, HttpStats, limits_from_args
    from ._metrics import SnapshotCollector, families
    from ._page import page
    from ._picture import Svg, picture_dot, render_svg
    from ._placement import BusyInfo, PlacementQuery, QueryError, parse_size, placement_answer, query_from_params
    from ._placement_text import placement_table
    from ._server import connection_cap, http_server, listen
    from ._sink import PublishResult, Sink, WatchingSink
    from ._view import ProbeStats, SinkStats, View, sink_stats

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
    'BusyInfo': '_placement',
    'PlacementQuery': '_placement',
    'QueryError': '_placement',
    'parse_size': '_placement',
    'placement_answer': '_placement',
    'placement_table': '_placement_text',
    'query_from_params': '_placement',
    'Exposition': '_exposition',
    'FAMILIES': '_families',
    'Family': '_families',
    'HttpConfig': '_http',
    'HttpLimits': '_http_limits',
    'HttpStats': '_http_limits',
    'MetricsCache': '_exposition',
    'ProbeControl': '_http',
    'ProbeStats': '_view',
    'PublishResult': '_sink',
    'Sink': '_sink',
    'SinkStats': '_view',
    'SnapshotCollector': '_metrics',
    'Svg': '_picture',
    'Target': '_files',
    'UnsafeFile': '_files',
    'View': '_view',
    'WatchingSink': '_sink',
    'add_http_args': '_http_flags',
    'connection_cap': '_server',
    'create_app': '_http',
    'families': '_metrics',
    'http_server': '_server',
    'limits_from_args': '_http_limits',
    'listen': '_server',
    'metrics_markdown': '_families',
    'page': '_page',
    'picture_dot': '_picture',
    'read_regular': '_files',
    'readiness': '_http',
    'render_svg': '_picture',
    'series_bound': '_families',
    'sink_stats': '_view',
    'write_file': '_files',
}


__getattr__, __dir__ = _lazy_names(__name__, _WHERE, __all__)
