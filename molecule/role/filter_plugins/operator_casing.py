"""
The operator's own snake_case for the role scenario's converge (``operator_keys_to_snake``):
``ansible_kopf.sdk.casing.keys_to_snake``, the SDK's ``snakeCaseParameters`` conversion, not a
copy of it. molecule.yml puts ``operator/`` on the controller's ``PYTHONPATH``.
"""
from collections.abc import Callable
from typing import Any

from ansible_kopf.sdk.casing import keys_to_snake


class FilterModule:
    def filters(self) -> dict[str, Callable[[Any], Any]]:
        return {'operator_keys_to_snake': keys_to_snake}
