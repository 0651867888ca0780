"""The kinds of NVML failure a call on an initialised NVML can meet, one per return code that callers treat
differently (:data:`KINDS`: the port raises them). Apart from :mod:`._nvml_errors` (the failures of opening
NVML) so that a machine without NVML, which never calls it, defines none of them."""

from __future__ import annotations

from ._nvml_errors import NvmlDriverNotLoaded, NvmlError, NvmlLibraryNotFound


class NvmlNotSupported(NvmlError):
    pass


class NvmlNoPermission(NvmlError):
    pass


class NvmlGpuLost(NvmlError):
    pass


class NvmlInvalidArgument(NvmlError):
    pass


class NvmlNotFound(NvmlError):
    pass


class NvmlUnknown(NvmlError):
    pass


KINDS: dict[int, type[NvmlError]] = {2: NvmlInvalidArgument, 3: NvmlNotSupported, 4: NvmlNoPermission,
                                      6: NvmlNotFound, 9: NvmlDriverNotLoaded, 12: NvmlLibraryNotFound,
                                      15: NvmlGpuLost, 999: NvmlUnknown}
