"""The client calls of the node-condition sink: the Node read whole, its status condition applied (server-side,
on ``nodes/status``: only our condition's fields are ours), and its taints replaced under a resourceVersion test
(``spec.taints`` is an atomic list: an apply would take every taint from its other owners)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._api._api import MANAGER, Obj
from .._api._errors import Conflict, InvalidObject
from ._client import LightkubeApi


class LightkubeNodeApi(LightkubeApi):
    """:class:`LightkubeApi` with the Node status and taint calls."""

    def get_node_object(self, name: str) -> Obj:
        from lightkube.resources.core_v1 import Node

        return dict(self._call(f"get node {name}", lambda: self._client.get(Node, name)).to_dict())

    def apply_node_condition(self, name: str, condition: Mapping[str, object]) -> None:
        from lightkube.resources.core_v1 import Node
        from lightkube.types import PatchType

        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"conditions": [dict(condition)]}}
        self._call(f"apply condition {condition['type']} to node {name}", lambda: self._client.patch(
            Node.Status, name, body, patch_type=PatchType.APPLY, field_manager=MANAGER, force=True))

    def clear_node_condition(self, name: str) -> None:
        """An apply that sends no condition: server-side apply removes the one our field manager owned."""
        from lightkube.resources.core_v1 import Node
        from lightkube.types import PatchType

        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
        self._call(f"clear our condition of node {name}", lambda: self._client.patch(
            Node.Status, name, body, patch_type=PatchType.APPLY, field_manager=MANAGER, force=True))

    def replace_node_taints(self, name: str, taints: Sequence[Mapping[str, object]], resource_version: str) -> None:
        """:class:`~.._api._errors.Conflict` when the Node changed since it was read: the patch's ``test`` operation
        fails with 422, the conflict it is (read the Node again and retry)."""
        from lightkube.resources.core_v1 import Node
        from lightkube.types import PatchType

        patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
                 {"op": "add", "path": "/spec/taints", "value": [dict(t) for t in taints]}]
        what = f"set the taints of node {name}"
        try:
            self._call(what, lambda: self._client.patch(Node, name, patch, patch_type=PatchType.JSON))
        except InvalidObject as exc:
            if exc.status != 422:
                raise
            raise Conflict(f"{what}: the Node changed since it was read ({exc})") from exc
