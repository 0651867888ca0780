"""The HTTP API and the server that carries it: routes, content negotiation, and a server bounded against slow
and hostile clients.

  ``_http``       the routes: metrics, health, the snapshot as JSON/DOT/SVG/text, the page, placement,
                  probes on demand
  ``_asgi``       the routes as one plain ASGI callable: exact paths, HEAD, 404/405/500, a thread pool
  ``_server``     uvicorn's h11 protocol with head and keep-alive timers and a connection cap
  ``_negotiate``  the header rules (pure): ``Accept``, ``Accept-Encoding``, ``If-None-Match``

The limits the server enforces and its flags are in ``exporter._core`` (the metrics count them too).

Imports: ``exporter._metrics``, ``exporter._webpage``, ``exporter._placement``, ``exporter._core``, ``topology``,
uvicorn (and h11).
Imported by: ``agent.serve``, through ``exporter``'s names (``create_app``, ``http_server``), and only there.
"""
