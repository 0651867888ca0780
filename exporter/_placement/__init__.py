"""The placement view: which N GPUs of this node for a job, as a document, a table and an HTTP answer.

  ``_placement``       the query and its answer (pure): the cost model's estimates, with their sources
  ``_placement_text``  the answer as a table for people, and its short forms for the page
  ``_placement_api``   ``GET /v1/placement``: answers cached per view and query, searched off the event loop

Imports: ``exporter._core``, ``topology``.
Imported by: ``exporter._http``, ``exporter._webpage``, and ``agent`` (``topolink place``) through ``exporter``'s
names.
"""
