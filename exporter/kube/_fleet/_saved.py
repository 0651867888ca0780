"""The fleet from a saved ``kubectl get nodes,resourceslices -o json``: the same read and fold as against the API
server, with the file standing in for it, so the fleet view can be tried, and tested, without a cluster.

The file is one JSON object with ``items`` (kubectl's ``List``, or a ``NodeList``/``ResourceSliceList``);
items of kind ``Node`` and ``ResourceSlice`` are read, any other kind is skipped. The two lists are handed to
:func:`read_cluster` as single pages through a :class:`PageApi` that answers from the file, so nothing here
decides what a node's summary is: the labels and slices fold exactly as when they come from a server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import msgspec

from .._api._api import RESOURCE_GROUP, SLICE_VERSIONS
from .._api._errors import InvalidObject
from ._cluster import PAGE, ClusterRead, read_cluster

MAX_SAVED_BYTES = 512 << 20  # a saved fleet of 10,000 nodes with managedFields is about 250 MB


class _Header(msgspec.Struct, frozen=True):
    kind: str = ""
    apiVersion: str = ""  # noqa: N815 - the Kubernetes field name


class _Listing(msgspec.Struct, frozen=True):
    items: list[msgspec.Raw]


_LISTING = msgspec.json.Decoder(_Listing)
_HEADER = msgspec.json.Decoder(_Header)


class SavedApi:
    """A :class:`PageApi` over a saved list: the nodes and the slices, each as one page."""

    def __init__(self, data: bytes, name: str = "the file") -> None:
        try:
            items = _LISTING.decode(data).items
            headers = [_HEADER.decode(raw) for raw in items]
        except msgspec.DecodeError as exc:
            raise InvalidObject(f"{name}: not the JSON list of `kubectl get nodes,resourceslices -o json`: "
                                f"{exc}") from exc
        self._nodes = [raw for raw, h in zip(items, headers, strict=True) if h.kind == "Node"]
        self._slices = [raw for raw, h in zip(items, headers, strict=True) if h.kind == "ResourceSlice"]
        versions = {h.apiVersion.removeprefix(f"{RESOURCE_GROUP}/") for h in headers if h.kind == "ResourceSlice"}
        served = [v for v in SLICE_VERSIONS if v in versions]
        if len(versions) > len(served):
            raise InvalidObject(f"{name}: ResourceSlices of an unknown version: {sorted(versions - set(served))}")
        self._versions = served or [SLICE_VERSIONS[0]]  # no slice saved: read as a server with none
        if not self._nodes:
            raise InvalidObject(f"{name}: no Node in the list (save it with `kubectl get nodes,resourceslices "
                                "-o json`)")

    def served_versions(self, group: str) -> Sequence[str]:
        return self._versions if group == RESOURCE_GROUP else []

    def get_page(self, path: str, params: Mapping[str, str], accept: str | None = None) -> bytes:
        del params, accept  # the read filters by label and driver itself, as against a server that ignores them
        items = self._nodes if path == "/api/v1/nodes" else self._slices
        return b'{"items":[' + b",".join(items) + b'],"metadata":{}}'


def read_saved(data: bytes, *, name: str = "the file", prefix: str = "gpu.topology",
               driver: str = "gpu.topology") -> ClusterRead:
    """Every labelled node's summary from a saved list; :class:`InvalidObject` with one line when the
    document is not such a list."""
    read = read_cluster(SavedApi(data, name), prefix=prefix, driver=driver, limit=PAGE)
    return dataclasses.replace(read, pages=0, source=name)
