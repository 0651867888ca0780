"""The API's naming rules, checked before any request (apimachinery and ``resource/v1`` validation).

Label keys and values, DNS subdomains and labels, DRA attribute names (C identifiers) and semver
versions. Anything that cannot be made valid is an :class:`InvalidObject`, never sent.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence

from .._api._errors import InvalidObject

_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_C_IDENT = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")
_RESERVED = ("kubernetes.io", "k8s.io")


def is_dns_label(s: str) -> bool:
    return len(s) <= 63 and bool(_DNS_LABEL.fullmatch(s))


def is_dns_subdomain(s: str, limit: int = 253) -> bool:
    return 0 < len(s) <= limit and all(is_dns_label(p) for p in s.split("."))


def is_label_value(v: str) -> bool:
    return v == "" or (len(v) <= 63 and bool(_LABEL_NAME.fullmatch(v)))


def joined_value(parts: Sequence[str], limit: int = 63) -> str:
    """``parts`` (each a label value) joined by ``.`` as one label value: where they do not all fit its 63
    characters, those that fit, in order, then ``more`` (the degradation reasons of a label or a taint; every
    reason is in the node condition's message and the metrics)."""
    if len(joined := ".".join(parts)) <= limit:
        return joined
    kept: list[str] = []
    for part in parts:
        if len(".".join([*kept, part, "more"])) > limit:
            break
        kept.append(part)
    return ".".join([*kept, "more"])


def is_label_key(k: str) -> bool:
    prefix, _, name = k.rpartition("/")
    if "/" in prefix or (prefix and not is_dns_subdomain(prefix)):
        return False
    return len(name) <= 63 and bool(_LABEL_NAME.fullmatch(name))


def is_reserved(prefix: str) -> bool:
    return any(prefix == r or prefix.endswith("." + r) for r in _RESERVED)


def check_prefix(prefix: str) -> str:
    """A label prefix / attribute domain we may own: a DNS subdomain of at most 63, outside the reserved ones."""
    if not is_dns_subdomain(prefix, 63) or is_reserved(prefix):
        raise InvalidObject(f"{prefix!r} is not a usable prefix: a lowercase DNS subdomain of <= 63 characters, "
                            "not under kubernetes.io or k8s.io")
    return prefix


def check_driver(driver: str) -> str:
    """A DRA driver name: a lowercase DNS subdomain of at most 63 characters."""
    if not is_dns_subdomain(driver, 63) or driver != driver.lower():
        raise InvalidObject(f"driver name {driver!r}: a lowercase DNS subdomain of at most 63 characters")
    return driver


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    bad = [f"{k}={v}" for k, v in labels.items() if not (is_label_key(k) and is_label_value(v))]
    if bad:
        raise InvalidObject("invalid label(s): " + ", ".join(sorted(bad)))
    return dict(labels)


def is_attribute_name(name: str) -> bool:
    """``<domain>/<C identifier>`` (domain <= 63, identifier <= 32) or a bare C identifier."""
    domain, slash, ident = name.rpartition("/")
    if slash and ("/" in domain or not is_dns_subdomain(domain, 63)):
        return False
    return len(ident) <= 32 and bool(_C_IDENT.fullmatch(ident)) and len(name) <= 96


def semver(version: str) -> str | None:
    """``580.65.06`` -> ``580.65.6``, ``9.0`` -> ``9.0.0`` (as go-semver's String()); None if not a version."""
    parts = version.strip().split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return None
    out = ".".join(str(int(p)) for p in [*parts, "0", "0"][:3])
    return out if _SEMVER.fullmatch(out) and len(out) <= 64 else None


def is_semver(v: str) -> bool:
    return len(v) <= 64 and bool(_SEMVER.fullmatch(v))


def fnv64a(text: str) -> str:
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def label_value(text: str) -> str:
    """A label value for an arbitrary string: kept when valid, else ``x`` + FNV-64a (as topograph does)."""
    return text if is_label_value(text) else "x" + fnv64a(text)


def cut_name(text: str, limit: int = 63, *, dns: bool = False) -> str:
    """``text`` as a label value (``dns``: a DNS subdomain, lowercase) of at most ``limit`` characters, readable:
    kept where it is one already; else its characters outside the charset turned to ``-`` and, where it changed
    or was cut, a ``-`` and 8 hex digits of a hash of the whole text at the end (so two texts never meet)."""
    fits = is_dns_subdomain(text, limit) if dns else is_label_value(text) and len(text) <= limit
    if text and fits:
        return text
    if dns:
        name = re.sub(r"-*\.[-.]*", ".", re.sub(r"[^a-z0-9.-]+", "-", text.lower()))
    else:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)
    tag = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9]+$', '', re.sub(r'^[^A-Za-z0-9]+', '', name)[:limit - 9])}-{tag}".lstrip("-")


OWN_DOMAIN = "node_"  # an NVLink domain of one node: never a host name (a DNS name has no "_")


def own_domain(node: str) -> str:
    """The ``nvlink-domain`` value of a node in no fabric clique: a domain of its own, named after the node
    but never equal to its host name, nor to any DNS name (Kueue leaves a node out whose level values repeat
    its host name: kueue#14009)."""
    return cut_name(OWN_DOMAIN + node)


def sanitise_value(text: str) -> str:
    """GFD's product-name rule: drop what the charset forbids, spaces to ``-``, trimmed to valid ends."""
    cleaned = re.sub(r"[^A-Za-z0-9_. -]", "", text).strip().replace(" ", "-")
    cleaned = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)
    return label_value(cleaned[:63].rstrip("-_.")) if cleaned else "unknown"


def object_name(*parts: str, limit: int = 253) -> str:
    """A DNS-subdomain object name from parts; hashed when too long."""
    raw = "-".join(p.lower() for p in parts)
    name = re.sub(r"[^a-z0-9.-]", "-", raw).strip("-.")
    name = re.sub(r"\.-|-\.", "-", re.sub(r"\.{2,}", ".", name))
    if is_dns_subdomain(name, limit):
        return name
    return f"topolink-{fnv64a(raw)}"


def device_name(text: str) -> str:
    """A DNS label for a device name (``mlx5_0`` -> ``mlx5-0``)."""
    name = re.sub(r"[^a-z0-9-]", "-", text.lower()).strip("-")[:63].rstrip("-")
    return name if is_dns_label(name) else "x" + fnv64a(text)
