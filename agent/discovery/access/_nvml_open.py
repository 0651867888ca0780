"""Opening NVML: whether a library loads at all, then the port (:mod:`._nvml_port`) over pynvml.

Apart from the port so that a machine without NVML (most of them) loads neither the port's module nor pynvml:
``open_nvml`` imports the port only once a library is there to be called.
"""

from __future__ import annotations

import sys

from ._nvml_errors import DEFAULT_LIBRARY, NvmlLibraryNotFound

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (a start-up cost) for it

if TYPE_CHECKING:
    from ._nvml_port import NvmlPort


def _default_library_loadable() -> bool:
    """Whether pynvml's own lookup would find a library: ``ctypes.CDLL`` of the name it loads, without
    importing pynvml (about 20 ms of every driverless start)."""
    if "pynvml" in sys.modules:
        return True  # already paid for; let pynvml decide as before
    import ctypes

    try:
        ctypes.CDLL(DEFAULT_LIBRARY)
    except OSError:
        return False
    return True


def open_nvml(library: str | None) -> NvmlPort:
    """Loads NVML (``library`` or the system's) and initialises it. Raises :class:`NvmlLibraryNotFound`
    when there is no library, another :class:`NvmlError` when ``nvmlInit`` fails."""
    if library is None and not _default_library_loadable():
        # The same error pynvml's nvmlInit raises when it cannot load the library.
        raise NvmlLibraryNotFound("nvmlInitWithFlags", 12)
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlLibraryNotFound("import pynvml", None, f"nvidia-ml-py is not installed: {exc}") from exc
    if library is not None:
        from ._nvml_library import use_library  # only where a library is named

        use_library(library)
    from ._nvml_port import NvmlPort  # the port loads where a library is there to call

    port = NvmlPort(pynvml)
    port.init()
    return port
