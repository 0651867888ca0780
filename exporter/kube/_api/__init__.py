"""The port to the API server: the ``KubeApi`` protocol every applier and reader talks to, the kinds of objects
written, the errors of the publishing boundary and the retry rule.

  ``_api``     ``KubeApi``, ``Kind``, ``NodeView``: objects cross as plain JSON dicts
  ``_errors``  ``PublishError`` and its kinds, mapped once from the client's errors
  ``_retry``   bounded exponential backoff with full jitter, honouring ``Retry-After``

Imports: ``topology`` only. No Kubernetes client: a fake implements the port in tests.
Imported by: every other subpackage of ``exporter.kube``.
"""
