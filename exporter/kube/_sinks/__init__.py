"""The Kubernetes sinks: each observes what is there, plans against the desired state, and writes the
difference through the port.

  ``_label_sinks``  node labels on the Node (server-side apply), an NFD ``NodeFeature``, or an NFD feature file
  ``_slice_sink``   the ResourceSlice sink: reconciles desired slices with the store and mutation cache
  ``_slice_watch``  the watch (informer) on this node's slices: feeds the store, queues a resync
  ``_slice_cache``  the store (the watch's alone) and the mutation cache of the sink's own writes
  ``_taint_sink``   the DeviceTaintRule applier (opt-in)
  ``_adopt``        a create answered 409: ours by every other mark is taken over, someone else's reported once

Imports: ``exporter.kube._desired``, ``exporter.kube._api``, ``exporter._core`` (the sink protocol, the file
door), ``topology``. Never the real client: a sink is handed a ``KubeApi``.
Imported by: ``exporter.kube._config``, and ``agent`` through ``exporter.kube``'s names.
"""
