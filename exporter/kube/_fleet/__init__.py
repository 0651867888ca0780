"""The fleet read for ``topolink cluster``: every node's labels and ResourceSlices of our driver, read in pages
and folded into one summary per node, then a document and a table.

  ``_cluster``       the paginated read through the port, folded into ``topology.NodeSummary`` per node
  ``_saved``         the same read from a saved ``kubectl get nodes,resourceslices -o json`` (``--from``)
  ``_claims_read``   the claim classes: nodes by their claim-class label, each class's groups from a member's slices
  ``_claims_text``   ``--groups``: how many groups of each kind and size each class has
  ``_cluster_text``  the fleet report as JSON and as a table, with where every number comes from

Imports: ``exporter.kube._desired`` (the bus bandwidth classes), ``exporter.kube._api``, ``topology``.
Imported by: ``agent`` (``topolink cluster``) through ``exporter.kube``'s names.
"""
