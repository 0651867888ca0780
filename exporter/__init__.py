"""Sinks: Prometheus collector, HTTP API, node labels, ResourceSlices, NFD feature file; and the file door
(``Target``, ``read_regular``) every file topolink writes or reads back goes through.

``create_app`` (the HTTP API) is loaded on first use only: it needs FastAPI, which nothing but
``topolink serve`` may import.
"""

from topology._lazy import lazy_names as _lazy_names

_TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms of start-up; mypy reads the block

if _TYPE_CHECKING:
    from ._families import FAMILIES, Family, metrics_markdown, series_bound
    from ._files import Target, UnsafeFile, read_regular, write_file
    from ._http import HttpConfig, ProbeControl, create_app
    from ._metrics import Exposition, MetricsCache, SnapshotCollector, families
    from ._page import page
    from ._picture import Svg, picture_dot, render_svg
    from ._sink import PublishResult, Sink, WatchingSink
    from ._view import ProbeStats, SinkStats, View, sink_stats

__all__ = [
    "FAMILIES",
    "Exposition",
    "Family",
    "HttpConfig",
    "MetricsCache",
    "ProbeControl",
    "ProbeStats",
    "PublishResult",
    "Sink",
    "SinkStats",
    "SnapshotCollector",
    "Svg",
    "Target",
    "UnsafeFile",
    "View",
    "WatchingSink",
    "create_app",
    "families",
    "metrics_markdown",
    "page",
    "picture_dot",
    "read_regular",
    "render_svg",
    "series_bound",
    "sink_stats",
    "write_file",
]

# Names load on first use: the CLI imports ``exporter.kube`` flags and ``topolink --help`` must not pay for
# prometheus_client, FastAPI or a Kubernetes client (only ``topolink serve`` needs them).
_WHERE = {
    'Exposition': '_metrics',
    'FAMILIES': '_families',
    'Family': '_families',
    'HttpConfig': '_http',
    'MetricsCache': '_metrics',
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
    'create_app': '_http',
    'families': '_metrics',
    'metrics_markdown': '_families',
    'page': '_page',
    'picture_dot': '_picture',
    'read_regular': '_files',
    'render_svg': '_picture',
    'series_bound': '_families',
    'sink_stats': '_view',
    'write_file': '_files',
}


__getattr__, __dir__ = _lazy_names(__name__, _WHERE, __all__)
