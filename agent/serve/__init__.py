"""The node agent (``topolink serve``): discovery and probe loops, state across restarts, the HTTP server.

  ``_run``    threads and signals: the discovery loop, the probe loop, a sink's watch, uvicorn, SIGHUP/SIGTERM
  ``_agent``  one agent's state and passes: the served snapshot, what each pass changed, the probe schedule
  ``_wake``   what wakes the sync worker: a discovery pass, or a delayed, coalesced resync of a sink
  ``_config`` the agent's settings (``ServeConfig``), as the command line reads them
  ``_probe``  probe passes in child processes, only on idle GPUs; killing them at shutdown
  ``_state``  the state directory: last complete snapshot and probe report, written atomically
  ``_log``    one line per event, text or JSON
  ``_retry``  while NVML does not answer on a node with GPUs: why, and how soon the next pass comes
Imports ``agent.discovery`` (NVML access for idleness), ``probes``, ``exporter`` and ``topology``;
imported by the command line (``agent.cli.serve``).
"""

from ._agent import Agent
from ._config import ServeConfig
from ._log import LOGGER, event
from ._log import setup as setup_log
from ._probe import next_probe_at, nvml_busy
from ._run import run

__all__ = ["LOGGER", "Agent", "ServeConfig", "event", "next_probe_at", "nvml_busy", "run", "setup_log"]
