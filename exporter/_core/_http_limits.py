"""What the HTTP server allows a client, and what it counts when it cuts one off. No server import here."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ._http_flags import HEADER_TIMEOUT_S, KEEP_ALIVE_S, MAX_CONNECTIONS, MAX_HEADER_BYTES


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpLimits:
    header_timeout_s: float = HEADER_TIMEOUT_S  # a request head must arrive within this of the connection
    keep_alive_s: int = KEEP_ALIVE_S  # an idle keep-alive connection is closed after this
    max_connections: int = MAX_CONNECTIONS  # one more evicts the connection waiting longest for a request head
    max_header_bytes: int = MAX_HEADER_BYTES  # request line and headers; more gets 431


CLOSE_REASONS = ("header_timeout", "evicted", "refused", "header_too_large")


class HttpStats:
    """Connections the server cut off, by reason; written on the server's event loop only, read anywhere."""

    __slots__ = ("closed",)

    def __init__(self) -> None:
        self.closed = dict.fromkeys(CLOSE_REASONS, 0)

    def count(self, reason: str) -> None:
        self.closed[reason] += 1


def limits_from_args(args: argparse.Namespace) -> HttpLimits:
    """The limits the flags ask for; ValueError names a flag out of range."""
    if args.http_header_timeout <= 0 or args.http_keep_alive < 1 or args.http_max_connections < 1:
        raise ValueError("--http-header-timeout must be > 0, --http-keep-alive and --http-max-connections >= 1")
    return HttpLimits(header_timeout_s=args.http_header_timeout, keep_alive_s=args.http_keep_alive,
                      max_connections=args.http_max_connections)
