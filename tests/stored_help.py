"""Writes agent/cli/help.txt, the help texts ``topolink --help`` and ``topolink COMMAND --help`` print without
argparse (agent/cli/_help.py says how they are used):

    .venv/bin/python -m tests.stored_help

Each text is rendered by argparse in a child process of this interpreter, 80 columns wide, with no
``TOPOLINK_*`` variable set, and its header names every one of our source files that building the parser
loaded, with its CRC-32. A command whose help differs when the environment sets its defaults is left out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

from agent.cli import _COMMANDS
from agent.cli._help import HEADER, HELP_FILE, TOP, WIDTH

REPO = Path(__file__).resolve().parents[1]
# Set by the DaemonSet: a command whose help shows one of them cannot be stored.
ENV_SET = {"TOPOLINK_SYSFS_ROOT": "/x", "TOPOLINK_LABEL_PREFIX": "x.example", "TOPOLINK_LABELS_VIA": "file",
           "TOPOLINK_HTTP_KEEP_ALIVE": "7", "POD_NAMESPACE": "x", "NODE_NAME": "x"}

_RENDER = """
import json, sys
from agent.cli import build_parser
key = sys.argv[1]
parser = build_parser("" if key == "-" else key)
if key != "-":
    parser = parser._subparsers._group_actions[0].choices[key]
files = sorted({m.__file__ for m in list(sys.modules.values())
                if m.__name__.split(".")[0] in ("agent", "exporter", "topology", "probes")
                and getattr(m, "__file__", None)})
print(json.dumps({"text": parser.format_help(), "files": files}))
"""


def render(key: str, env: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """The help of ``key`` (``-`` for the top level) as argparse prints it, and the files its parser read."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TOPOLINK_") and k not in ENV_SET}
    out = subprocess.run([sys.executable, "-c", _RENDER, key], capture_output=True, text=True, cwd=REPO,
                         env={**clean, "COLUMNS": str(WIDTH), **(env or {})}, check=True)
    result = json.loads(out.stdout)
    return result["text"], result["files"]


def stored_keys() -> list[str]:
    return [TOP, *(name for name, _, _ in _COMMANDS)]


def help_file() -> str:
    """What agent/cli/help.txt holds: a line saying what it is, then each storable text under its header."""
    lines = ["# topolink's help texts as argparse prints them, stored: written by `python -m tests.stored_help`, "
             "read by agent/cli/_help.py"]
    python = "{}.{}".format(*sys.version_info[:2])
    for key in stored_keys():
        text, files = render(key)
        if render(key, ENV_SET)[0] != text:
            continue  # its help shows defaults from the environment
        assert f"\n{HEADER}" not in text and text.endswith("\n") and not text.endswith("\n\n")
        sources = [f"{Path(f).resolve().relative_to(REPO)}={zlib.crc32(Path(f).read_bytes()):08x}" for f in files]
        lines.append(" ".join([f"{HEADER}{key}", python, *sources]))
        lines.append(text.removesuffix("\n"))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    Path(HELP_FILE).write_text(help_file(), encoding="utf-8")
    print(f"wrote {Path(HELP_FILE).relative_to(REPO)}")
