"""``topolink serve``'s HTTP flags and their defaults. Loaded by ``topolink --help``: argparse only."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

HEADER_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 15
MAX_CONNECTIONS = 1024
MAX_HEADER_BYTES = 16 * 1024


def add_http_args(parser: argparse.ArgumentParser, env: Mapping[str, str] | None) -> None:
    """``--http-header-timeout``, ``--http-keep-alive`` and ``--http-max-connections`` ($TOPOLINK_HTTP_*)."""
    from ._settings import count, env_value, seconds

    header, keep_alive, connections = seconds(high=3600), count(1, 86400), count(1, 1 << 20)
    parser.add_argument("--http-header-timeout", type=header, metavar="SECONDS",
                        default=env_value(env, "TOPOLINK_HTTP_HEADER_TIMEOUT", header, HEADER_TIMEOUT_S),
                        help="a client must send its request line and headers within this many seconds of "
                             f"connecting ($TOPOLINK_HTTP_HEADER_TIMEOUT, default {HEADER_TIMEOUT_S:g})")
    parser.add_argument("--http-keep-alive", type=keep_alive, metavar="SECONDS",
                        default=env_value(env, "TOPOLINK_HTTP_KEEP_ALIVE", keep_alive, KEEP_ALIVE_S),
                        help=f"idle keep-alive connections are closed after this ($TOPOLINK_HTTP_KEEP_ALIVE, "
                             f"default {KEEP_ALIVE_S})")
    parser.add_argument("--http-max-connections", type=connections, metavar="N",
                        default=env_value(env, "TOPOLINK_HTTP_MAX_CONNECTIONS", connections,
                                            MAX_CONNECTIONS),
                        help="open connections at most; one more closes the one waiting longest for a request "
                             f"($TOPOLINK_HTTP_MAX_CONNECTIONS, default {MAX_CONNECTIONS})")
