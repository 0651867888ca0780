"""Sinks: Prometheus collector, HTTP API, node labels, ResourceSlices, NFD feature file.

``create_app`` (the HTTP API) is loaded on first use only: it needs FastAPI, which nothing but
``topolink serve`` may import.
"""

from typing import TYPE_CHECKING, Any

from ._families import FAMILIES, Family, metrics_markdown, series_bound
from ._metrics import Exposition, MetricsCache, SnapshotCollector, families
from ._page import page
from ._picture import Svg, picture_dot, render_svg
from ._sink import PublishResult, Sink
from ._view import ProbeStats, SinkStats, View

if TYPE_CHECKING:
    from ._http import HttpConfig, ProbeControl, create_app

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
    "View",
    "create_app",
    "families",
    "metrics_markdown",
    "page",
    "picture_dot",
    "render_svg",
    "series_bound",
]

_LAZY = ("HttpConfig", "ProbeControl", "create_app")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import _http

        return getattr(_http, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
