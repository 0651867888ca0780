"""A PCI function's configuration space, as far as discovery reads it: whether ACS redirects peer requests.

Optional (the extended configuration space needs root): what cannot be read is "not known", never a
problem, since nothing depends on it.
"""

from __future__ import annotations

import struct

from ._sysfs import Reader

_ACS_CAP_ID = 0x000D
_ACS_REQUEST_REDIRECT = 1 << 2
_EXTENDED_CONFIG = 4096  # bytes of config space when the extended capabilities are readable (root)


def read_acs(r: Reader) -> bool | None:
    """ACS P2P Request Redirect of the function ``r`` reads; None when its configuration space is unreadable."""
    try:
        config = r.read_bytes("config", _EXTENDED_CONFIG)
    except OSError:
        return None
    return None if config is None else acs_request_redirect(config)


def acs_request_redirect(config: bytes) -> bool | None:
    """Whether ACS has P2P Request Redirect on: ``None`` without the extended configuration space in ``config``
    (unprivileged reads get 64 bytes), ``False`` when the capability list is readable and has no ACS."""
    if len(config) < _EXTENDED_CONFIG:
        return None
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(config) - 8 and offset not in seen:
        seen.add(offset)
        (header,) = struct.unpack_from("<I", config, offset)
        if header in (0, 0xFFFFFFFF):
            return False
        if header & 0xFFFF == _ACS_CAP_ID:
            (control,) = struct.unpack_from("<H", config, offset + 6)
            return bool(control & _ACS_REQUEST_REDIRECT)
        offset = (header >> 20) & 0xFFC
    return False
