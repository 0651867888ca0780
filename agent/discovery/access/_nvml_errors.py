"""NVML's failures as topolink errors: one kind per return code that callers treat differently."""

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


class NvmlDriverNotLoaded(NvmlError):
    pass


class NvmlUnknown(NvmlError):
    pass


class NvmlLibraryNotFound(NvmlError):
    pass


DEFAULT_LIBRARY = "libnvidia-ml.so.1"  # the library nvidia-ml-py loads on Linux: the one not found


KINDS: dict[int, type[NvmlError]] = {2: NvmlInvalidArgument, 3: NvmlNotSupported, 4: NvmlNoPermission,
                                      6: NvmlNotFound, 9: NvmlDriverNotLoaded, 12: NvmlLibraryNotFound,
                                      15: NvmlGpuLost, 999: NvmlUnknown}
