"""Filters that decide whether a Kubernetes write is needed: `mysql_k8s_out_of_sync` (the
mysql role's tasks/objects.yml: which of the instance's objects to apply in its one call)
and `mysql_k8s_in_sync` (tasks/schedule.yml: whether the backup CronJob needs applying).

kubernetes.core.k8s (both `apply: true` and `state: present`) sends a PATCH for every
object that contains a list, even when nothing differs. The role reads each object first
and sends only what these filters find out of sync, so a steady-state reconciliation makes
no write requests at all. The bench role (bench/roles/bench_mysql) loads this file by path
to measure the same checks.
"""

from __future__ import annotations

import json
from typing import Any

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


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


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "mysql_k8s_in_sync": k8s_in_sync,
            "mysql_k8s_out_of_sync": k8s_out_of_sync,
        }
