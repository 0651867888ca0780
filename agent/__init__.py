"""The composition root: the command line, the node agent, and discovery.

  ``agent.cli``        one module per command; parses flags and wires the subpackages below together
  ``agent.serve``      the node agent's loops, state directory and logging (``topolink serve``)
  ``agent.discovery``  sources -> ``topology.Snapshot``, through the access layer to the file system and NVML
Imports flow down that list and never back; ``agent`` may import ``probes``, ``exporter`` and ``topology``,
and nothing imports ``agent``.
"""

__version__ = "0.1.0"  # the distribution's version (pyproject.toml reads it from here at build time)
