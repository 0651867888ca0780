"""The fleet as topolink published it: every node's labels and its ResourceSlices of our driver, read in pages,
folded into one ``topology.NodeSummary`` per node for ``topology.fleet_report``.

Reading costs what a fleet of 10,000 nodes can afford: both lists are paginated (``limit``/``continue``, so
no response holds the fleet), nodes are asked for as ``PartialObjectMetadataList`` (labels, not status or
images) and only those carrying our ``gpu.count`` label, slices only of our driver; each page is decoded
into just the fields read here (msgspec skips the rest, managedFields, other labels and attributes and all,
without building them; what it builds is kept out of the cycle collector), folded into a few numbers per node
and dropped. An expired continue token (410: the list outlived etcd's compaction) starts that list again
once; what was folded is keyed by name, so nothing counts twice. What it costs at 10,000 nodes, and where:
``benchmarks/placement.py --only cluster``.

What a summary says and where it comes from: product, GPU count and NVLink domain from the labels; the best
groups' bus bandwidth from ``allreduce-busbw-N`` (the class's lower edge: an estimate, rounded down); the
GPUs' NVLink rate (the slowest GPU's ``nvlinkCount`` x the rate of its ``nvlinkGen``) and the RDMA NICs'
line rate (their ``rateGbps`` added up) from the slices: theoretical.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from topology import NodeSummary, nvlink_bytes_per_second

from .._api._api import RESOURCE_GROUP, SLICE_VERSIONS
from .._api._errors import Expired, InvalidObject, NotFound
from .._desired._busbw import KEY, SIZES
from .._desired._names import OWN_DOMAIN, own_domain

PAGE = 500
PARTIAL = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


class PageApi(Protocol):
    def get_page(self, path: str, params: Mapping[str, str], accept: str | None = None) -> bytes: ...

    def served_versions(self, group: str) -> Sequence[str]: ...


# -- the fields read, and only those ------------------------------------------------------------------------
# gc=False: a page decodes into a few small records per device (about a million for 10,000 nodes) that can
# hold no cycle, so the cycle collector neither tracks them nor walks them while they are made.

class _ListMeta(msgspec.Struct, frozen=True, gc=False):
    continue_: str = msgspec.field(default="", name="continue")


class _Meta(msgspec.Struct, frozen=True, gc=False):
    name: str = ""
    labels: dict[str, str] = {}


class _Node(msgspec.Struct, frozen=True, gc=False):
    metadata: _Meta = _Meta()


class _NodeList(msgspec.Struct, frozen=True, gc=False):
    items: list[_Node] = []
    metadata: _ListMeta = _ListMeta()


class _Str(msgspec.Struct, frozen=True, gc=False):
    string: str | None = None


class _Int(msgspec.Struct, frozen=True, gc=False):
    value: int | None = msgspec.field(default=None, name="int")


class _Pool(msgspec.Struct, frozen=True, gc=False):
    generation: int = 0


_ATTRS = (("type", _Str), ("nvlinkCount", _Int), ("nvlinkGen", _Int), ("rateGbps", _Int))
# A summary's labels, by field: (field, label key under the prefix, type, default when the node has no such label)
_LABELS: tuple[tuple[str, str, Any, Any], ...] = (
    ("count", "gpu.count", str | msgspec.UnsetType, msgspec.UNSET), ("product", "gpu.product", str, "unknown"),
    ("domain", "nvlink-domain", str, ""), *((f"busbw{n}", KEY.format(n=n), str, "") for n in SIZES))
_BUSBW = operator.attrgetter(*(f"busbw{n}" for n in SIZES))  # the busbw labels' values, in the order of SIZES


def _struct(name: str, fields: list[tuple[str, Any, Any]], **kw: Any) -> Any:
    """A frozen, untracked (gc=False) record type built at run time; ``fields``: (name, type, default), where a
    class as the default is called for each record that lacks the field."""
    return msgspec.defstruct(name, [(f, kind, msgspec.field(default_factory=default) if isinstance(default, type)
                                     else default) for f, kind, default in fields], frozen=True, gc=False, **kw)


@functools.cache
def _node_decoder(prefix: str) -> msgspec.json.Decoder[Any]:
    """A decoder of node lists that builds only the labels a summary reads, named under ``prefix``; every other
    label is skipped as it is parsed."""
    labels = _struct("Labels", [(f, kind, default) for f, _, kind, default in _LABELS],
                     rename={f: f"{prefix}/{key}" for f, key, _, _ in _LABELS})
    listing: Any = list  # built at run time: subscripted with classes made here, not types mypy can see
    meta = _struct("NodeMeta", [("name", str, ""), ("labels", labels, labels)])
    node = _struct("Node", [("metadata", meta, meta)])
    page = _struct("NodeList", [("items", listing[node], list), ("metadata", _ListMeta, _ListMeta)])
    return msgspec.json.Decoder(page)


@functools.cache
def _slice_decoder(driver: str) -> msgspec.json.Decoder[Any]:
    """A decoder of slice lists that builds only the four attributes read here, named in ``driver``'s domain;
    every other attribute is skipped as it is parsed."""
    attrs = _struct("Attributes", [(name, kind | None, None) for name, kind in _ATTRS],
                    rename={name: f"{driver}/{name}" for name, _ in _ATTRS})
    listing: Any = list
    basic = _struct("Basic", [("attributes", attrs, attrs)])
    device = _struct("Device", [("attributes", attrs, attrs), ("basic", basic | None, None)])  # v1beta1 wraps them
    spec = _struct("Spec", [("driver", str, ""), ("nodeName", str, ""), ("pool", _Pool, _Pool),
                            ("devices", listing[device], list)])
    item = _struct("Slice", [("metadata", _Meta, _Meta), ("spec", spec, spec)])
    page = _struct("SliceList", [("items", listing[item], list), ("metadata", _ListMeta, _ListMeta)])
    return msgspec.json.Decoder(page)


_NODES = msgspec.json.Decoder(_NodeList)


@dataclass(slots=True)
class _NodeFigures:
    generation: int = -1
    gpus: int = 0
    nvlink_bytes_per_second: float | None = None  # the slowest GPU's NVLink rate so far, theoretical
    nvlink_unknown: bool = False  # a GPU without a known NVLink rate: the node's is unknown
    nic_bytes_per_second: float = 0.0
    nics: int = 0
    slices: set[str] = field(default_factory=set)  # folded already (a list started again reads them again)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterRead:
    summaries: tuple[NodeSummary, ...]
    without_slices: tuple[str, ...]  # labelled nodes with no slice of our driver
    slices: int
    pages: int
    slice_version: str | None  # None: the server serves no ResourceSlices
    restarts: int = 0  # lists started again after an expired continue token
    source: str | None = None  # the saved list read instead of an API server (``cluster --from``)


def pages(api: PageApi, path: str, params: Mapping[str, str], decoder: msgspec.json.Decoder[Any], *,
          limit: int = PAGE, accept: str | None = None, restarts: list[int] | None = None) -> Iterator[list[Any]]:
    """The list's items, one decoded page at a time; once, after 410 Gone, from the start again."""
    token, again = "", True
    while True:
        query = {**params, "limit": str(limit), **({"continue": token} if token else {})}
        try:
            body = api.get_page(path, query, accept)
        except Expired:
            if not token or not again:
                raise
            again, token = False, ""
            if restarts is not None:
                restarts.append(1)
            continue
        try:
            page = decoder.decode(body)
        except msgspec.DecodeError as exc:
            raise InvalidObject(f"GET {path}: not a list of the expected kind: {exc}") from exc
        yield page.items
        token = page.metadata.continue_
        if not token:
            return


def slice_version(api: PageApi) -> str | None:
    try:
        served = set(api.served_versions(RESOURCE_GROUP))
    except NotFound:
        return None
    return next((v for v in SLICE_VERSIONS if v in served), None)


def _nvlink(gen: int | None, links: int | None) -> float | None:
    return (nvlink_bytes_per_second(gen, links) or None) if gen is not None and links is not None else None


def _fold(figures: dict[str, _NodeFigures], obj: Any, driver: str,
          rates: dict[tuple[int | None, int | None], float | None]) -> None:
    """``obj``: a slice as ``_slice_decoder`` decodes it; ``rates``: NVLink rates by generation and link count,
    filled as they are met (a fleet has few pairs)."""
    spec = obj.spec
    if not spec.nodeName or spec.driver != driver:
        return
    got = figures.get(spec.nodeName)
    if got is None or spec.pool.generation > got.generation:
        figures[spec.nodeName] = got = _NodeFigures(generation=spec.pool.generation)
    elif spec.pool.generation < got.generation:
        return  # a slice of an older generation of the pool: consumers ignore it, so do we
    if obj.metadata.name in got.slices:
        return
    got.slices.add(obj.metadata.name)
    gpus, slowest, unknown, nics, nic_rate = 0, got.nvlink_bytes_per_second, got.nvlink_unknown, 0, 0.0
    for device in spec.devices:
        attrs = device.attributes if device.basic is None else device.basic.attributes
        kind = attrs.type.string if attrs.type is not None else None
        if kind == "gpu":
            gpus += 1
            count, gen = attrs.nvlinkCount, attrs.nvlinkGen
            pair = (gen.value if gen is not None else None, count.value if count is not None else None)
            rate = rates[pair] if pair in rates else rates.setdefault(pair, _nvlink(*pair))
            if rate is None:
                unknown = True
            elif slowest is None or rate < slowest:
                slowest = rate
        elif kind == "nic" and attrs.rateGbps is not None and attrs.rateGbps.value is not None:
            nic_rate += attrs.rateGbps.value * 1e9 / 8
            nics += 1
    got.gpus += gpus
    got.nvlink_bytes_per_second, got.nvlink_unknown = slowest, unknown
    got.nic_bytes_per_second += nic_rate
    got.nics += nics


def summary_of(name: str, labels: Any, figures: _NodeFigures | None) -> NodeSummary | None:
    """The node's summary, or None when it carries no GPU count of ours. ``labels``: as ``_node_decoder``
    decodes them."""
    count = labels.count
    if count is msgspec.UNSET or not count.isdigit():
        return None
    busbw = tuple((n, int(value) * 1e9) for n, value in zip(SIZES, _BUSBW(labels), strict=True) if value.isdigit())
    domain = labels.domain
    # a domain of its own: every own_domain value starts with OWN_DOMAIN, so no other is worked out
    own = domain == name or (domain.startswith(OWN_DOMAIN) and domain == own_domain(name))
    return NodeSummary(
        node=name, product=labels.product, gpus=int(count), clique=domain if domain and not own else None,
        busbw=busbw,
        busbw_source="estimate",
        nvlink_bytes_per_second=(figures.nvlink_bytes_per_second if figures and figures.gpus
                                 and not figures.nvlink_unknown else None),
        nic_bytes_per_second=figures.nic_bytes_per_second if figures and figures.nics else None)


def read_cluster(api: PageApi, *, prefix: str = "gpu.topology", driver: str = "gpu.topology",
                 limit: int = PAGE) -> ClusterRead:
    """Every labelled node's summary, in pages of ``limit``."""
    restarts: list[int] = []
    count = 0
    labels: dict[str, Any] = {}
    for nodes in pages(api, "/api/v1/nodes", {"labelSelector": f"{prefix}/gpu.count"}, _node_decoder(prefix),
                       limit=limit, accept=PARTIAL, restarts=restarts):
        count += 1
        for node in nodes:
            if node.metadata.labels.count is not msgspec.UNSET:  # a server ignoring the selector sends them all
                labels[node.metadata.name] = node.metadata.labels
    version = slice_version(api)
    figures: dict[str, _NodeFigures] = {}
    rates: dict[tuple[int | None, int | None], float | None] = {}
    slices: set[str] = set()
    if version is not None:
        path = f"/apis/{RESOURCE_GROUP}/{version}/resourceslices"
        for items in pages(api, path, {"fieldSelector": f"spec.driver={driver}"}, _slice_decoder(driver), limit=limit,
                           restarts=restarts):
            count += 1
            for obj in items:
                if obj.spec.driver == driver:  # a saved list (or a server ignoring the selector) has the others'
                    slices.add(obj.metadata.name)
                _fold(figures, obj, driver, rates)
    names = sorted(labels)
    summaries = [s for name in names if (s := summary_of(name, labels[name], figures.get(name)))]
    return ClusterRead(summaries=tuple(summaries), without_slices=tuple(n for n in names if n not in figures),
                       slices=len(slices), pages=count, slice_version=version, restarts=len(restarts))
