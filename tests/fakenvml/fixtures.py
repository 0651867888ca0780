"""pytest fixtures for machine profiles (imported by tests/conftest.py).

In-process discovery against a profile works because the NVML port hands nvidia-ml-py the test library
explicitly and the library reads its profile (``$TOPOLINK_FAKENVML_PROFILE``) at every ``nvmlInit`` that
starts a session: one process can discover one profile after another. ``fake_machine`` points that
variable at the profile it materialises (undone after the test).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from . import ENV_CALLS, ENV_PROFILE, FakeNode, materialize

MakeMachine = Callable[..., FakeNode]


@pytest.fixture
def fake_machine(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> MakeMachine:
    """``fake_machine("hgx-h100", overrides={...})``: the profile written out (``.root`` is the sysfs root,
    ``.nvml_library`` the test NVML) and made the one this process's NVML answers from."""

    def make(profile: str | Path, overrides: Mapping[str, Any] | None = None) -> FakeNode:
        name = Path(str(profile)).stem
        node = materialize(profile, tmp_path_factory.mktemp(name), overrides)
        monkeypatch.setenv(ENV_PROFILE, str(node.nvml_profile))
        monkeypatch.setenv(ENV_CALLS, str(node.calls_file))
        return node

    return make
