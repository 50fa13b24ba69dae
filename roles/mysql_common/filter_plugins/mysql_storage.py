"""Filters over the data volume's size: the bytes of a Kubernetes quantity
(`mysql_quantity_to_bytes`) and what the mysql role does with a size request
(`mysql_data_volume_size`, tasks/storage.yml): which size to apply and, when it applies
another than requested, the reason status.storage gives.

Python rather than Jinja: sizes are compared as numbers of bytes (1Gi equals 1024Mi), and
the reasons are a chain of cases whose order matters (shrinking is reported before a
missing or non-expandable StorageClass).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

_SUFFIXES = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([-+]?[0-9]+))?([a-zA-Z]*)\s*$")




def quantity_to_bytes(value: Any) -> int:
    """Number of bytes in a Kubernetes quantity such as "1Gi", "1500M" or "2e9"."""
    match = _QUANTITY.match(str(value))
    if not match or match.group(3) not in _SUFFIXES:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    number, exponent, suffix = match.groups()
    try:
        amount = Decimal(number) * (Decimal(10) ** int(exponent or 0)) * _SUFFIXES[suffix]
    except InvalidOperation as exc:
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from exc
    return int(amount.to_integral_value(rounding="ROUND_CEILING"))


def data_volume_size(requested: Any, *, current: Any, wanted_class: Any, data_class: Any,
                     class_found: Any, expandable: Any) -> dict[str, Any]:
    """The size to apply to the data volume and why it differs from ``requested``
    (spec.storage_size): ``{size, reason}``. ``current`` is the claim's size ('' before the
    claim exists), ``wanted_class`` spec.storage_class, ``data_class`` the class the claim
    has ('' for hostPath), ``class_found`` whether that StorageClass exists and
    ``expandable`` whether it allows volume expansion (as the task decided both).

    A new claim gets the requested size. An existing one grows when its class allows
    expansion and keeps its size otherwise; it never shrinks. A changed spec.storage_class
    (which the CRD refuses where CEL validation runs) is reported too: the volume keeps its
    class.
    """
    if not current:
        return {"size": requested, "reason": ""}
    wanted, now = quantity_to_bytes(requested), quantity_to_bytes(current)
    grow, shrink = wanted > now, wanted < now
    reason = ""
    if wanted_class != data_class:
        kept = f"StorageClass '{data_class}'" if data_class else "its hostPath volume"
        reason = f"spec.storage_class cannot change after creation: the data volume keeps {kept}. "
    if shrink:
        reason += (f"Shrinking a volume is not supported: requested {requested} is smaller than"
                   f" the current {current}.")
    elif grow and not data_class:
        reason += ("The data volume is a hostPath PersistentVolume without a StorageClass, which"
                   f" cannot be expanded: it stays at {current}.")
    elif grow and not class_found:
        reason += (f"StorageClass '{data_class}' does not exist, so the volume cannot be"
                   f" expanded: it stays at {current}.")
    elif grow and not expandable:
        reason += (f"StorageClass '{data_class}' does not allow volume expansion: the volume"
                   f" stays at {current}.")
    return {"size": requested if grow and expandable else current, "reason": reason}


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "mysql_quantity_to_bytes": quantity_to_bytes,
            "mysql_data_volume_size": data_volume_size,
        }
