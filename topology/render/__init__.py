"""The renderers: a snapshot as people read it.

  ``_topo_table``  the ``nvidia-smi topo -m`` table (``matrix``, ``topo_table``, ``LEGEND``, ``gpu_labels``)
  ``_summary``     the human summary (``topolink discover --format table``)
  ``_no_gpu``      the one line saying why a snapshot holds no GPU (``no_gpu_reason``)
  ``_dot``         the Graphviz DOT picture

Imports: ``topology.model`` and ``topology.fabric`` (and the standard library).
Imported by: the names of ``topology`` only. Loads nothing on import.
"""
