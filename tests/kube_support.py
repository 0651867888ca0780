"""Shared by the Kubernetes publishing tests: snapshots of every machine profile (discovered once per
session) and strict kubernetes-validate validators loaded once per Kubernetes version and kind."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import referencing
from kubernetes_validate.utils import schema_contents

import topology as t
from tests.fakenvml import ENV_CALLS, ENV_PROFILE, MACHINES, materialize

PROFILES = sorted(p.stem for p in MACHINES.glob("*.yaml"))
K8S = ("1.34", "1.35", "1.36", "1.37")
# DeviceTaintRule versions each release serves (reference/kubernetes.md 3.6)
TAINT_RULE_VERSION = {"1.34": "v1alpha3", "1.35": "v1alpha3", "1.36": "v1beta2", "1.37": "v1"}


@contextmanager
def _env(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def discover_profile(profile: str, workdir: Path, overrides: Mapping[str, Any] | None = None) -> t.Snapshot:
    from agent.discovery import discover
    from agent.discovery.access import DiscoveryContext, FsRoot

    node = materialize(profile, workdir, overrides)
    with _env(**{ENV_PROFILE: str(node.nvml_profile), ENV_CALLS: str(node.calls_file)}):
        return discover(DiscoveryContext(root=FsRoot(node.root), nvml_library=str(node.nvml_library)))


@cache
def _definitions(version: str) -> referencing.Registry[Any]:
    defs = schema_contents(f"kubernetes-json-schema/v{version}.0-local-strict/_definitions.json", version)
    return referencing.Resource.from_contents(defs) @ referencing.Registry()  # type: ignore[no-any-return]


@cache
def _validator(version: str, kind: str, api_version: str) -> jsonschema.protocols.Validator:
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = schema_contents(f"kubernetes-json-schema/v{version}.0-local-strict/{kind.lower()}-{group}.json", version)
    registry = referencing.Resource.from_contents(schema) @ _definitions(version)
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def validate(obj: dict[str, Any], version: str) -> None:
    """Strict: an unknown field anywhere fails, as kubernetes-validate --strict."""
    _validator(version, obj["kind"], obj["apiVersion"]).validate(obj)
