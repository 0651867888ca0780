"""Access to the machine: the file system below a movable root, and NVML behind one narrow port.

Everything discovery reads passes through here: ``FsRoot`` (every ``/sys`` and ``/proc`` read, jailed
when the root is a gathered tree) and ``NvmlPort`` (every NVML call, its errors translated once), each
recorded while a ``Reads`` watches the pass, with the ``DiscoveryContext`` that says which root and which
NVML library a pass uses. The port's own module (``NvmlPort``, ``Handle``, ``RawFabric``, ``RawField``: from
``._nvml_port``) loads where ``open_nvml`` finds a library, so a machine without NVML never loads it.
Imports: ``topology`` only (and ``pynvml`` inside functions). Imported by the sources, the assembly, the
serve loop's idleness check and the command line.
"""

from topology._lazy import lazy_names as _lazy_names

from ._context import DiscoveryContext
from ._fsroot import Directory, FsRoot
from ._jail import AttributeTooLarge, NotARegularFile
from ._nvml_errors import NvmlDriverNotLoaded, NvmlError, NvmlLibraryNotFound
from ._nvml_open import open_nvml
from ._record import Reads

_TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a start-up cost)

if _TYPE_CHECKING:
    from ._nvml_kinds import (
        NvmlGpuLost,
        NvmlInvalidArgument,
        NvmlNoPermission,
        NvmlNotFound,
        NvmlNotSupported,
        NvmlUnknown,
    )

__all__ = [
    "AttributeTooLarge",
    "Directory",
    "DiscoveryContext",
    "FsRoot",
    "NotARegularFile",
    "NvmlDriverNotLoaded",
    "NvmlError",
    "NvmlGpuLost",
    "NvmlInvalidArgument",
    "NvmlLibraryNotFound",
    "NvmlNoPermission",
    "NvmlNotFound",
    "NvmlNotSupported",
    "NvmlUnknown",
    "Reads",
    "open_nvml",
]

# The kinds of failure a call on an initialised NVML meets load with the port's calls, where a library is there:
# a machine without NVML defines none of them.
_WHERE = {name: "_nvml_kinds" for name in ("NvmlGpuLost", "NvmlInvalidArgument", "NvmlNoPermission", "NvmlNotFound",
                                           "NvmlNotSupported", "NvmlUnknown")}
__getattr__, __dir__ = _lazy_names(__name__, _WHERE, __all__)
