"""What every sink shares: the sink protocol, the served view, file I/O, and the rules that more than one
sink applies.

  ``_sink``          the ``Sink`` protocol the agent loop publishes through, and its result
  ``_view``          the frozen ``View`` the agent serves (snapshot and counters)
  ``_files``         file I/O (``Target``, ``read_regular``): every file topolink writes or reads back
  ``_derive``        rows the metrics, the page and the picture share, computed from a snapshot
  ``_claim_groups``  a node's GPU groups by bus id (NVLink islands, PCIe switches, GPU+NIC pairs) and its claim
                     class: the claim templates, the class label and the page share them
  ``_health``        bandwidth ratios, classes and GPU degradation: the one rule for metrics, labels and taints
  ``_http_limits``   what the HTTP server allows a client and counts when it cuts one off (the view and the
                     metrics carry those counters, so they sit here, below both)
  ``_http_flags``    ``topolink serve``'s HTTP flags (argparse only: ``topolink --help`` loads it)

Imports: ``topology`` only (and the standard library).
Imported by: every other subpackage of ``exporter``, and ``agent`` (file I/O, the HTTP flags).
Loads nothing on import: ``topolink --help`` imports ``_http_flags`` and must not pay for the rest.
"""
