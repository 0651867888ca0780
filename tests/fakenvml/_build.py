"""Compiling fakenvml.c with gcc into a cache directory keyed by the source's hash."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("fakenvml.c")
# Named as the real library, so a process that loads NVML the default way finds it on LD_LIBRARY_PATH.
LIBRARY_NAME = "libnvidia-ml.so.1"


class BuildError(RuntimeError):
    pass


def cache_dir() -> Path:
    base = os.environ.get("TOPOLINK_FAKENVML_CACHE")
    if base:
        return Path(base)
    return Path(tempfile.gettempdir()) / f"topolink-fakenvml-{os.getuid()}"


def build_library(out_dir: Path | None = None) -> Path:
    """The path of the compiled library, building it when the source changed. Safe to call concurrently."""
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    target_dir = (out_dir or cache_dir()) / digest
    target = target_dir / LIBRARY_NAME
    if target.exists():
        return target
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise BuildError("no C compiler (gcc or $CC) to build the test NVML")
    target_dir.mkdir(parents=True, exist_ok=True)
    tmp = target_dir / f".{LIBRARY_NAME}.{os.getpid()}"
    cmd = [compiler, "-shared", "-fPIC", "-O1", "-std=c11", "-Wall", "-Wextra",
           "-Wl,-soname," + LIBRARY_NAME, "-o", str(tmp), str(SOURCE)]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BuildError(f"{' '.join(cmd)} failed:\n{result.stderr}")
    os.replace(tmp, target)  # readers see no library or a whole one
    return target
