"""Filters that decide whether a Kubernetes write is needed: `mysql_k8s_out_of_sync` (the
mysql role's tasks/objects.yml: which of the instance's objects to apply in its one call),
`mysql_k8s_in_sync` (tasks/schedule.yml: whether the backup CronJob needs applying) and
`mysql_k8s_foreign` (objects.yml: which of the objects it would write are another's).

kubernetes.core.k8s (both `apply: true` and `state: present`) sends a PATCH for every
object that contains a list, even when nothing differs. The role reads each object first
and sends only what these filters find out of sync, so a steady-state reconciliation makes
no write requests at all. The bench role (bench/roles/bench_mysql) loads this file by path
to measure the same checks.
"""

from __future__ import annotations

import decimal
import json
import re
from typing import Any

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# A Kubernetes quantity: the API server stores it in its canonical form (cpu: 0.5 is read
# back as "500m", memory: 1073741824 as "1Gi"), so the live value is compared by amount.
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_SUFFIX = {None: 1, "m": decimal.Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
           "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
           "Pi": 2**50, "Ei": 2**60}


def _amount(value: Any) -> decimal.Decimal | None:
    """The amount of a quantity (a number, or text such as 500m or 1Gi); None otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    found = _QUANTITY.match(str(value))
    return decimal.Decimal(found[1]) * _SUFFIX[found[2]] if found else None


def _same_scalar(actual: Any, desired: Any) -> bool:
    """Equal, or the same quantity written two ways (only where one side is text: a number
    and a number compare as numbers)."""
    if actual == desired:
        return True
    if not (isinstance(actual, str) or isinstance(desired, str)):
        return False
    amount = _amount(desired)
    return amount is not None and amount == _amount(actual)


def _contains(actual: Any, desired: Any) -> bool:
    """True when every field of `desired` is present with the same value in `actual`.

    Dicts may hold more keys in `actual` (server defaults, status). Lists must have
    the same length and match element by element (the API server keeps order). Scalars
    are equal, or the same quantity (the API server's canonical form of a desired one).
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
    return _same_scalar(actual, desired)


def _plain(value: Any) -> Any:
    """Turn Ansible's tagged/lazy containers into plain JSON values."""
    return json.loads(json.dumps(value, default=str))


def _owns_exactly(fields: Any, desired: Any, identity: frozenset[str] = frozenset()) -> bool:
    """Whether a server-side apply's field set (`fieldsV1`) names exactly the map keys of
    `desired`, at every level of maps: a key it owns that `desired` lacks is one the next
    apply removes. Keys that identify the object (`identity`: apiVersion and kind at the
    top, name and namespace in metadata) are never in a field set. Lists (owner references,
    containers) are compared by value in _contains."""
    if not isinstance(desired, dict):
        return True
    if not isinstance(fields, dict):
        return False
    owned = {key[2:] for key in fields if key.startswith("f:")}
    if owned != set(desired) - identity:
        return False
    return all(_owns_exactly(fields[f"f:{key}"], value,
                             _METADATA_IDENTITY if key == "metadata" and identity else frozenset())
               for key, value in desired.items() if key not in identity)


_TOP_IDENTITY = frozenset({"apiVersion", "kind"})
_METADATA_IDENTITY = frozenset({"name", "namespace"})


def _applied_as_desired(actual: dict[str, Any], desired: dict[str, Any], manager: str) -> bool:
    """Whether what was last applied to `actual` is exactly `desired`: by the client-side
    apply's last-applied annotation when there is one, else by the field set the
    server-side apply of `manager` owns (managedFields; it holds no values, so a Secret
    applied this way keeps no second copy of its data)."""
    annotations = (actual.get("metadata") or {}).get("annotations") or {}
    if LAST_APPLIED in annotations:
        try:
            return bool(json.loads(annotations[LAST_APPLIED]) == desired)
        except ValueError:
            return False
    managed = (actual.get("metadata") or {}).get("managedFields") or []
    applied = [entry.get("fieldsV1") for entry in managed
               if entry.get("manager") == manager and entry.get("operation") == "Apply"]
    return len(applied) == 1 and _owns_exactly(applied[0], desired, _TOP_IDENTITY)


def k8s_in_sync(actual: Any, desired: Any, manager: str = "mysql-operator") -> bool:
    """True when applying `desired` over the live object `actual` would change nothing.

    `actual` is one live object (a dict) or None/empty when it does not exist. In sync
    means: the object exists, it was last applied with exactly `desired` (so no field
    needs removing; a server-side apply is recognised by the field manager `manager`) and
    the live object still carries every desired value (nobody changed it since).
    """
    if not actual:
        return False
    actual = _plain(actual)
    desired = _plain(desired)
    return _applied_as_desired(actual, desired, manager) and _contains(actual, desired)


def k8s_out_of_sync(pairs: Any) -> list[Any]:
    """The `desired` object of every `{current, desired}` pair that is not in sync.

    A pair whose `desired` is empty stands for an object the role does not manage in
    this configuration and is skipped. The result is one list for one
    kubernetes.core.k8s call, in the order given.
    """
    return [_plain(pair["desired"]) for pair in pairs or []
            if pair.get("desired") and not k8s_in_sync(pair.get("current"), pair["desired"])]


def k8s_foreign(pairs: Any, name: str, namespace: str) -> list[str]:
    """Why each `current` object of the `{current, desired}` pairs is not this instance's to
    write, [] when all are: one controlled by another owner than MySQL `name` (another
    instance whose Service is named like this one's <name>-direct, say), or, without a
    controller, one whose labels name another instance (app.kubernetes.io/instance; and for
    a volume, otus.homework/mysql-namespace) or none. An apply would take such an object
    over: another instance's clients would reach this one's server."""
    problems = []
    for pair in pairs or []:
        current, desired = pair.get("current") or {}, pair.get("desired") or {}
        if not current or not desired:
            continue
        metadata = current.get("metadata") or {}
        where = "/".join(part for part in (metadata.get("namespace"), metadata.get("name")) if part)
        what = f"{current.get('kind', 'object')} {where}"
        controller = next((o for o in metadata.get("ownerReferences") or []
                           if isinstance(o, dict) and o.get("controller")), None)
        labels = metadata.get("labels") or {}
        if controller is not None:
            if controller.get("kind") != "MySQL" or controller.get("name") != name:
                owner = f"{controller.get('kind')} '{controller.get('name')}'"
                problems.append(f"{what} belongs to {owner}, not to MySQL '{name}'")
        elif labels.get("app.kubernetes.io/instance") != name or labels.get(
                "otus.homework/mysql-namespace", namespace) != namespace:
            instance = labels.get("app.kubernetes.io/instance")
            problems.append(f"{what} exists and is not MySQL '{name}''s (label"
                            f" app.kubernetes.io/instance: {instance!r})")
    return problems


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "mysql_k8s_in_sync": k8s_in_sync,
            "mysql_k8s_out_of_sync": k8s_out_of_sync,
            "mysql_k8s_foreign": k8s_foreign,
        }
