"""The root of every error topolink raises on purpose.

    TopolinkError
    ├── BadPciAddress        (topology)   a PCI address that does not parse
    ├── SchemaError          (topology)   JSON that is not topolink.topology/v1
    ├── SourceError          (agent)      a discovery source could not read its subsystem
    ├── NvmlError            (agent)      an NVML call failed; kinds per return code
    └── ProbeError           (probes)     a probe could not be planned or run

Third-party errors are chained with ``from`` at the boundary that meets them, never leaked.
"""


class TopolinkError(Exception):
    """Base of every error topolink raises on purpose."""


class SchemaError(TopolinkError, ValueError):
    """A document that is not a valid ``topolink.topology/v1`` snapshot."""
