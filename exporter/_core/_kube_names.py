"""The settings that name Kubernetes things, each read by the API's own naming rule (apimachinery's
``IsDNS1123Subdomain`` and ``IsDNS1123Label``) where the flag or the ``TOPOLINK_*`` variable is read: a label
prefix or a driver name the server would refuse is one line naming the setting, exit 2, before any request.

The label prefix is a label key's prefix and our taints' and conditions' too: the agent holds it to at most 63
characters outside kubernetes.io and k8s.io (``exporter.kube._desired._names.check_prefix``; a test holds the two
to one verdict). A DRA driver name is a DNS subdomain of at most 63 (``resource.k8s.io/v1``). Loads nothing on
import: ``re`` only when a value is checked.
"""

from __future__ import annotations

from typing import Any

from ._settings import Pattern, SettingError

__all__ = ["DRIVER", "NAMESPACE", "NODE", "PREFIX", "Subdomain"]

_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_RESERVED = ("kubernetes.io", "k8s.io")


class Subdomain(Pattern):
    """A lowercase DNS subdomain of at most ``longest`` characters; ``reserved``: not kubernetes.io, k8s.io or
    under them (a prefix we may own)."""

    def __init__(self, what: str, longest: int, *, reserved: bool = False, bad: tuple[str, ...] = ()) -> None:
        tail = ", not under kubernetes.io or k8s.io" if reserved else ""
        super().__init__(f"{what}: a lowercase DNS subdomain of at most {longest} characters{tail}", _SUBDOMAIN,
                         longest, bad=("GPU_Topology!", "Bad_Name", "-gpu", "gpu..topology", "gpu.", "a/b", *bad))
        self.reserved = reserved

    def parse(self, text: str) -> Any:
        value = super().parse(text)
        if self.reserved and any(value == r or value.endswith("." + r) for r in _RESERVED):
            raise SettingError(f"not {self.what}")
        return value

    def bad_examples(self) -> tuple[str, ...]:
        return (*super().bad_examples(), *(("kubernetes.io", "node.k8s.io") if self.reserved else ()))


PREFIX = Subdomain("a label prefix", 63, reserved=True)
DRIVER = Subdomain("a DRA driver name", 63)
NODE = Subdomain("a node name", 253, bad=("Node_1",))
NAMESPACE = Pattern("a namespace name (a lowercase DNS label of at most 63 characters)",
                    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", 63, bad=("kube.system", "Default", "-a"))
