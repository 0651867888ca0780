"""The node's page for operators and its pictures: one self-contained HTML page, no script.

  ``_page``     ``/``: the page, assembled from the parts below and the placement's short forms
  ``_layout``   the node drawn in HTML: GPUs by socket and PCIe switch, banded by NVLink island
  ``_heatmap``  pair bandwidth between GPUs as an HTML table
  ``_picture``  the Graphviz picture of the node (DOT, pure) and its SVG through ``dot``

Imports: ``exporter._placement``, ``exporter._core``, ``topology``.
Imported by: ``exporter._http`` (``/``, ``/topology.svg``), and ``agent`` through ``exporter``'s names.
"""
