"""Access to the machine: the file system below a movable root, and NVML behind one narrow port.

Everything discovery reads passes through here: ``FsRoot`` (every ``/sys`` and ``/proc`` read, jailed
when the root is a gathered tree) and ``NvmlPort`` (every NVML call, its errors translated once), each
recorded while a ``Reads`` watches the pass, with the ``DiscoveryContext`` that says which root and which
NVML library a pass uses. The port's own module (``NvmlPort``, ``Handle``, ``RawFabric``, ``RawField``: from
``._nvml_port``) loads where ``open_nvml`` finds a library, so a machine without NVML never loads it.
Imports: ``topology`` only (and ``pynvml`` inside functions). Imported by the sources, the assembly, the
serve loop's idleness check and the command line.
"""

from ._context import DiscoveryContext
from ._fsroot import Directory, FsRoot
from ._jail import AttributeTooLarge, NotARegularFile
from ._nvml_errors import (
    NvmlDriverNotLoaded,
    NvmlError,
    NvmlGpuLost,
    NvmlInvalidArgument,
    NvmlLibraryNotFound,
    NvmlNoPermission,
    NvmlNotFound,
    NvmlNotSupported,
    NvmlUnknown,
)
from ._nvml_open import open_nvml
from ._record import Reads

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
