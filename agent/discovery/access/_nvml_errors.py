"""NVML's failures as topolink errors: the base, and the two that say no NVML is there (the kinds a call meets
are :mod:`._nvml_kinds`). Opening NVML is :mod:`._nvml_open`, which imports the port that imports these.
"""

from __future__ import annotations

from topology import TopolinkError

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
