"""Which NVML library this process holds.

A specific library (a machine profile's test NVML, ``--nvml-library``) is loaded by its path before
``nvmlInit``: nvidia-ml-py then opens ``libnvidia-ml.so.1`` by name, and the dynamic linker hands it the
library already loaded under that SONAME (glibc's ``dlopen`` matches loaded objects' SONAMEs), so no
library internal is set. One library per process: the first named is the process's NVML (a test NVML
reads its profile at every ``nvmlInit``, so one process can still discover several profiles in turn).
"""

from __future__ import annotations

import threading
from typing import Any

from ._nvml_errors import DEFAULT_LIBRARY, NvmlLibraryNotFound

_lock = threading.Lock()
_loaded: str | None = None  # the library named first in this process: its NVML from then on


def use_library(library: str) -> None:
    """Loads ``library`` as this process's ``libnvidia-ml.so.1``, the name nvidia-ml-py opens; refuses a library
    that the linker would not hand it (another SONAME, or another library of that name loaded already)."""
    global _loaded  # noqa: PLW0603 - one process, one dynamic linker: which NVML it holds is process state
    import ctypes
    import os

    with _lock:
        if library == _loaded:
            return
        if _loaded is not None:
            raise NvmlLibraryNotFound("dlopen", 12, f"{library}: this process's NVML is {_loaded} already")
        try:
            lib = ctypes.CDLL(library)
        except OSError as exc:
            raise NvmlLibraryNotFound("dlopen", 12, f"{library}: {exc}") from exc
        try:
            named = ctypes.CDLL(DEFAULT_LIBRARY, mode=os.RTLD_NOLOAD)
        except OSError as exc:
            raise NvmlLibraryNotFound("dlopen", 12, f"{library}: its SONAME is not {DEFAULT_LIBRARY}, "
                                      "the name nvidia-ml-py loads") from exc
        if _address(ctypes, lib) != _address(ctypes, named):
            raise NvmlLibraryNotFound("dlopen", 12, f"{library}: another {DEFAULT_LIBRARY} is loaded already")
        _loaded = library


def _address(ctypes: Any, lib: Any) -> int | None:
    """Where ``lib``'s ``nvmlInitWithFlags`` is: the same library loaded twice has it at one address."""
    return ctypes.cast(lib.nvmlInitWithFlags, ctypes.c_void_p).value  # type: ignore[no-any-return]
