"""The real client behind the port: lightkube over HTTP, and the watch read line by line.

  ``_client``        ``LightkubeApi``: in-cluster config or kubeconfig, every client error mapped once
  ``_watch_stream``  one watch over HTTP, each way it ends reported as a value
  ``_transport``     the transport every request goes through (our User-Agent)
  ``_bulk``          the transport list pages go through: ``http.client``, whole bodies (megabytes) read at once

Imports: ``exporter.kube._api``, ``topology``; lightkube inside functions only, so importing costs nothing.
Imported by: ``exporter.kube._config`` (the factory the serve loop calls), and ``agent`` (``topolink cluster``)
through ``exporter.kube``'s names.
"""
