"""The Prometheus exposition: every metric family as data, the collectors that fill them from the served view,
and the ``/metrics`` bytes rendered once per view.

  ``_exposition``  the ``/metrics`` bytes (text and OpenMetrics, gzip), cached per view, live counters appended
  ``_metrics``     the collectors: families from the ``View`` and the HTTP server's counters
  ``_families``    every family: name, type, help, labels and series bound (docs/reference.md's table comes from it)

Imports: ``exporter._core``, ``topology``, prometheus_client.
Imported by: ``exporter._http`` (``GET /metrics``) and, through ``exporter``'s names, ``agent.serve``.
"""
