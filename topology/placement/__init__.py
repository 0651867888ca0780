"""The cost model and placement: what a collective over a GPU group costs, and which groups are best.

  ``_cost_types``    what the cost model and the search return (records with ``to_dict``)
  ``_ring``          the best ring over a group, and the time of a traffic pattern on the fabric
  ``_cost_model``    ``CostModel`` and ``collective_estimate``: a collective's time over a group
  ``_all_reduce``    a ring all-reduce's time from its slowest edge (``all_reduce_estimate``)
  ``_best_groups``   the K best groups of N GPUs on one node (``best_groups``)
  ``_fleet_report``  a fleet's nodes grouped by NVLink domain and product, with outliers

Imports: ``topology.model`` and ``topology.fabric`` (and the standard library).
Imported by: the names of ``topology`` only. Loads nothing on import.
"""
