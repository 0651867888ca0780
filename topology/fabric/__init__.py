"""The fabric: how the devices of a snapshot are connected, and what those connections allow.

  ``_paths``        the ``nvidia-smi topo -m`` class between two devices (``path``, ``PathIndex``)
  ``_rates``        theoretical PCIe and NVLink rates per direction
  ``_capability``   what the links between two devices allow, per direction
  ``_links``        physical links, routes over them, the constants standing in for missing numbers
  ``_fabric``       the links between GPUs and the route each GPU-to-GPU transfer takes
  ``_pcie_switch``  the PCIe switch a device hangs from
  ``_views``        NVLink islands, NUMA affinity, nearest NICs, GPUDirect RDMA readiness
  ``_physics``      the physics table: what each NVLink and PCIe generation and GPU family can do
  ``_physics_rules`` a snapshot's rates, generations, widths and measurements held to that table

Imports: ``topology.model`` only (and the standard library).
Imported by: ``topology.codec`` (coherence, validation), ``topology.placement``, ``topology.render``, and through the
names of ``topology`` by everything else. Loads nothing on import.
"""
