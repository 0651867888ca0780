"""NVML's failures as topolink errors (the base, and the two that say no NVML is there; the kinds a call meets
are :mod:`._nvml_kinds`), and opening NVML: whether a library loads at all, then the port (:mod:`._nvml_port`)
over pynvml.

One module, as every discovery loads both (a machine without NVML learns it from ``open_nvml``'s
:class:`NvmlLibraryNotFound`); the port stays apart so that such a machine loads neither the port's module nor
pynvml: ``open_nvml`` imports the port only once a library is there to be called.
"""

from __future__ import annotations

import sys

from topology import TopolinkError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (a start-up cost) for it

if TYPE_CHECKING:
    from ._nvml_port import NvmlPort

_NAMES = {1: "UNINITIALIZED", 2: "INVALID_ARGUMENT", 3: "NOT_SUPPORTED", 4: "NO_PERMISSION", 6: "NOT_FOUND",
          7: "INSUFFICIENT_SIZE", 9: "DRIVER_NOT_LOADED", 10: "TIMEOUT", 12: "LIBRARY_NOT_FOUND",
          13: "FUNCTION_NOT_FOUND", 15: "GPU_IS_LOST", 16: "RESET_REQUIRED", 17: "OPERATING_SYSTEM",
          18: "LIB_RM_VERSION_MISMATCH", 25: "ARGUMENT_VERSION_MISMATCH", 999: "UNKNOWN"}


class NvmlError(TopolinkError):
    """An NVML call failed. ``call`` is the NVML function, ``code`` its nvmlReturn_t (None: no code)."""

    def __init__(self, call: str, code: int | None, detail: str = "") -> None:
        self.call, self.code = call, code
        name = f"NVML_ERROR_{_NAMES.get(code, str(code))}" if code is not None else "error"
        self.reason = f"{name}{': ' + detail if detail else ''}"
        super().__init__(f"{call}: {self.reason}")


class NvmlDriverNotLoaded(NvmlError):
    pass


class NvmlLibraryNotFound(NvmlError):
    pass


DEFAULT_LIBRARY = "libnvidia-ml.so.1"  # the library nvidia-ml-py loads on Linux: the one not found


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
