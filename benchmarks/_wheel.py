"""topolink installed as a user installs it, for start-up timings: the wheel built from this checkout and
installed into a temporary virtual environment with its bytecode compiled.

The wheel goes in without its dependencies, which are read from the interpreter's own environment (a
``.pth`` line naming its site-packages, after the wheel's: the wheel's packages are the ones imported), so no
package index is needed. pip compiles what it installs even where PYTHONDONTWRITEBYTECODE is set, and
``compileall`` runs again over the installed packages so that no module is left without its ``.pyc``.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("agent", "topology", "probes", "exporter")


@dataclass(frozen=True)
class Installed:
    """The temporary environment: its interpreter, its ``topolink`` console script and its site-packages."""

    python: Path
    topolink: Path
    site: Path
    pyc: int  # compiled modules of topolink's packages found installed
    modules: int  # their source modules


def _quiet(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"startup: {' '.join(cmd[:4])} ... failed: {proc.stderr.strip()[-2000:]}")


def _purelib(python: str | Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def install_wheel(repo: Path, python: str, dest: Path) -> Installed:
    """Build the wheel of ``repo`` with ``python`` (its environment has setuptools) and install it into a
    new virtual environment under ``dest``, bytecode compiled."""
    wheels, venv = dest / "wheels", dest / "venv"
    build = [python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(repo)]
    try:  # with this environment's setuptools where it has one recent enough, else pip's own build environment
        _quiet([*build, "--no-build-isolation"])
    except SystemExit:
        _quiet(build)
    _quiet([python, "-m", "venv", "--without-pip", str(venv)])
    new_python = venv / "bin" / "python"
    (wheel,) = wheels.glob("topolink-*.whl")
    _quiet([python, "-m", "pip", "--python", str(new_python), "install", "-q", "--no-deps", "--compile", str(wheel)])
    site = _purelib(new_python)
    (site / "_topolink_dependencies.pth").write_text(f"{_purelib(python)}\n")
    _quiet([str(new_python), "-m", "compileall", "-q", *(str(site / p) for p in PACKAGES)])
    sources = [p for pkg in PACKAGES for p in (site / pkg).rglob("*.py")]
    tag = sys.implementation.cache_tag
    compiled = [p for p in sources if (p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc").is_file()]
    return Installed(new_python, venv / "bin" / "topolink", site, len(compiled), len(sources))
