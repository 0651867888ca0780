"""What topolink wants the cluster to hold, computed from a snapshot (pure): node labels, ResourceSlice devices
and attributes, DeviceTaintRules, and the API's naming rules they obey.

  ``_labels``       node labels: small labelers merged strictly, keys kept when their facts are unknown
  ``_compat``       the opt-in nvidia.com/ keys GPU Feature Discovery also writes
  ``_busbw``        the estimated all-reduce bus bandwidth classes of the best groups of 2, 4 and 8 GPUs
  ``_slices``       DRA ResourceSlices for one node: devices, attributes, the pool plan
  ``_slice_facts``  what each slice attribute derives from, and whether a snapshot knows all of it
  ``_taints``       DeviceTaintRules for degraded GPUs
  ``_claims``       DeviceClasses and ResourceClaimTemplates per claim class, selecting the GPU driver's devices
  ``_claim_places`` a node's GPU places read back from the slice devices topolink published
  ``_names``        label keys and values, DNS names, attribute names, checked before any request

Imports: ``exporter.kube._api``, ``exporter._core`` (the health rule), ``topology``.
Imported by: ``exporter.kube._sinks``, ``exporter.kube._fleet`` (the bus bandwidth classes),
``exporter.kube._config``, and ``agent`` through ``exporter.kube``'s names.
"""
