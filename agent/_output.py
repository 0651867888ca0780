"""Where command output goes: standard output, or a file replaced atomically."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def write_output(text: str, output: str | None) -> None:
    if output is None or output == "-":
        sys.stdout.write(text)
        return
    path = Path(output)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # readers see the old file or the new one, never half of one
