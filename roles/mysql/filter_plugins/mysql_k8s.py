"""Filters the mysql role uses to decide whether a Kubernetes write is needed, and
whether its server Deployment is ready (`mysql_deployment_ready`).

kubernetes.core.k8s (both `apply: true` and `state: present`) sends a PATCH for
every object that contains a list, even when nothing differs. The role reads each
object first and sends only those that `mysql_k8s_out_of_sync` picks from its list of
current/desired pairs, so a steady-state reconciliation makes no write requests at all.
`mysql_k8s_in_sync` is that comparison for one pair; the role does not call it itself
(the bench's per-task variant does, `bench/roles/bench_mysql`).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

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


def _contains(actual: Any, desired: Any) -> bool:
    """True when every field of `desired` is present with the same value in `actual`.

    Dicts may hold more keys in `actual` (server defaults, status). Lists must have
    the same length and match element by element (the API server keeps order).
    """
    if isinstance(desired, dict):
        if not isinstance(actual, dict):
            return False
        return all(key in actual and _contains(actual[key], value)
                   for key, value in desired.items())
    if isinstance(desired, list):
        if not isinstance(actual, list) or len(actual) != len(desired):
            return False
        return all(_contains(a, d) for a, d in zip(actual, desired, strict=True))
    return actual == desired


def _plain(value: Any) -> Any:
    """Turn Ansible's tagged/lazy containers into plain JSON values."""
    return json.loads(json.dumps(value, default=str))


def k8s_in_sync(actual: Any, desired: Any) -> bool:
    """True when applying `desired` over the live object `actual` would change nothing.

    `actual` is one live object (a dict) or None/empty when it does not exist. In sync
    means: the object exists, it was last applied with exactly `desired` (so no field
    needs removing) and the live object still carries every desired value (nobody
    changed it since).
    """
    if not actual:
        return False
    actual = _plain(actual)
    desired = _plain(desired)
    annotations = (actual.get("metadata") or {}).get("annotations") or {}
    try:
        last_applied = json.loads(annotations.get(LAST_APPLIED, "null"))
    except ValueError:
        return False
    return last_applied == desired and _contains(actual, desired)


def k8s_out_of_sync(pairs: Any) -> list[Any]:
    """The `desired` object of every `{current, desired}` pair that is not in sync.

    A pair whose `desired` is empty stands for an object the role does not manage in
    this configuration and is skipped. The result is one list for one
    kubernetes.core.k8s call, in the order given.
    """
    return [_plain(pair["desired"]) for pair in pairs or []
            if pair.get("desired") and not k8s_in_sync(pair.get("current"), pair["desired"])]


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


def deployment_ready(deployment: Any) -> bool:
    """True when a Deployment's rollout is complete and its pods are ready.

    The controller has seen the current spec (observedGeneration), every replica runs the
    current pod template (updatedReplicas), and as many are ready as are wanted: right
    after a template change the old pod may still count as ready, so readyReplicas alone
    would call a server ready that is being replaced.
    """
    if not isinstance(deployment, dict) or not deployment:
        return False
    metadata = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    wanted = int(spec.get("replicas", 1))
    return (int(status.get("observedGeneration") or 0) >= int(metadata.get("generation") or 0)
            and int(status.get("updatedReplicas") or 0) == wanted
            and int(status.get("replicas") or 0) == wanted
            and int(status.get("readyReplicas") or 0) >= wanted >= 1)


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "mysql_k8s_in_sync": k8s_in_sync,
            "mysql_k8s_out_of_sync": k8s_out_of_sync,
            "mysql_quantity_to_bytes": quantity_to_bytes,
            "mysql_deployment_ready": deployment_ready,
        }
