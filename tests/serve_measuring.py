"""``python -m tests.serve_measuring``: ``serve`` on a machine profile with the fixture guard lifted, so that
tests can drive the agent's probe machinery (schedule, requests, children, kills) on a profile's GPUs.

The CPU backend times this host and files the numbers under the profile's devices: exactly what
``topolink serve`` refuses to do with a fixture (``agent.cli._common.fixture_reason``). Only tests of the probe
machinery start this; tests of what ``serve`` decides start ``agent.cli.serve`` itself.
"""

from __future__ import annotations

import sys

from agent.cli import _common, serve


def _measure_anywhere(args: object) -> None:
    return None


if __name__ == "__main__":
    _common.fixture_reason = _measure_anywhere  # type: ignore[assignment]
    sys.exit(serve.main())
