"""The node agent's settings, as ``topolink serve`` reads them from its flags and environment."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from exporter import HttpLimits


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ServeConfig:
    host: str = "0.0.0.0"
    port: int = 9402
    discovery_interval_s: float = 60.0
    probe_interval_s: float = 86400.0
    duty_cycle: float = 0.01
    probe_profile: str = "quick"
    probe_backend: str = "auto"
    probe_collective_timing: str | None = None  # graph (nccl-tests -G 1) | stream (-G 0); None: the profile's
    probe_tests: tuple[str, ...] | None = None
    probe_item_timeout_s: float | None = None
    state_dir: Path = Path("/var/lib/topolink")
    log_format: str = "text"
    probe_token: str | None = None
    probes_off: str | None = None  # why no probe may run here (discovery reads a tree from elsewhere)
    dot_timeout_s: float = 10.0
    metrics_pair_series_limit: int = 50_000  # exporter's PAIR_SERIES_LIMIT (not imported: serve's start path)
    version: str = "0+unknown"
    http: HttpLimits = dataclasses.field(default_factory=HttpLimits)
