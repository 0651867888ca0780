"""The Kubernetes sinks: each observes what is there, plans against the desired state, and writes the
difference through the port.

  ``_label_sinks``  node labels on the Node (server-side apply), an NFD ``NodeFeature``, or an NFD feature file
  ``_slice_sink``   the ResourceSlice applier
  ``_slice_watch``  the watch on this node's slices that keeps the cache fresh and wakes the agent
  ``_slice_cache``  this node's slices as the watch last saw them
  ``_taint_sink``   the DeviceTaintRule applier (opt-in)
  ``_adopt``        a create answered 409: ours by every other mark is taken over, someone else's reported once

Imports: ``exporter.kube._desired``, ``exporter.kube._api``, ``exporter._core`` (the sink protocol, the file
door), ``topology``. Never the real client: a sink is handed a ``KubeApi``.
Imported by: ``exporter.kube._config``, and ``agent`` through ``exporter.kube``'s names.
"""
