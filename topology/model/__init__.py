"""The model: one node's entities and the words every other subpackage of ``topology`` speaks.

  ``_entities``          the snapshot; ``per_snapshot``: what is derived from a snapshot, built once while it
                         lives; and, from ``_devices``, its entities (GPUs, NICs, links, NUMA nodes, ...), ``link_id``
  ``_devices``           the entities themselves
  ``_record``            what every record is (``Record``: frozen, slotted, keyword-only) and ``replace``
  ``_ids``               canonical ids: PCI addresses, host bridges, NUMA nodes, CPU lists and masks
  ``_facts``             which facts of a snapshot are known (``Aspect``, ``Fact``, ``Knowledge``)
  ``_provenance``        where a number comes from (``Source``), source outcomes, problems
  ``_measurement``       measurements, their statistics, named matrices
  ``_with_measurements`` measurements joined to a snapshot
  ``_carry_forward``     the last known value of every fact the latest snapshot could not read
  ``_device_order``      the order every table, picture and view lists GPUs and RDMA NICs in
  ``_snapshot_limits``   how many of each thing a snapshot may hold
  ``_text_bounds``       how much outside text a snapshot keeps, and how it is shown
  ``_errors``            ``TopolinkError`` and ``SchemaError``
  ``_clock``             how far ahead of this clock a date may be (the clock skew allowed)

Imports: the standard library only.
Imported by: every other subpackage of ``topology`` (codec, fabric, placement, render), and through the names of
``topology`` by everything else. Loads nothing on import.
"""
