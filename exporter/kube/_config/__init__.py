"""Setting the Kubernetes side up and taking it down: flags, configuration and the sink factory, prune, and the
tables the shipped RBAC and docs/reference.md are checked against.

  ``_flags``      the publishing flags (argparse only: ``topolink --help`` loads it)
  ``_config``     ``KubePublishConfig`` from flags, and the factory that builds the sinks the serve loop runs
  ``_prune``      the uninstall path: remove every label, NodeFeature, slice and taint rule topolink made
  ``_rbac``       the permissions behind every call the port makes, by use
  ``_reference``  the label and attribute reference of docs/reference.md, from the tables the code uses

Imports: every other subpackage of ``exporter.kube``, ``exporter._core``, ``topology``.
Imported by: ``agent`` (``serve``, ``prune``) through ``exporter.kube``'s names, and ``agent.cli.serve`` for
``_flags``. Loads nothing on import.
"""
