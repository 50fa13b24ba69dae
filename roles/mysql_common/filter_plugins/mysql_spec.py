"""Filters over a MySQL object: the problems of its spec that the role reports before it
touches anything (`mysql_spec_problems`, the mysql role's tasks/validate.yml), and the parts
of an instance the mysql_backup and mysql_restore roles keep of it
(`mysql_instance_parts`).

The checks are Python, not one Jinja expression, because they are a list of independent
rules, each with its message: here each rule reads as one `if`, and the unit tests
(tests/unit/test_mysql_spec.py) pin the messages users see. What the tasks hand over is
already decided where Jinja decides it the same way for every role (whether a password
source is set, whether the schedule fires: `mysql_cron_next` is in mysql_backups.py).
"""

from __future__ import annotations

import re
from typing import Any

from jinja2.filters import do_int

# The CRD's own patterns (deploy/crd.yml), repeated for runs without the CRD in front.
_NAME = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
_QUANTITY = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
_DATABASE = r"^[A-Za-z0-9_$-]{1,64}$"
# a MySQLBackup's name (or latest, none), or a backup file's name in a bucket (<file>.sql),
# or a point in time (RFC 3339)
_RESTORE_FROM = (r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?|[A-Za-z0-9_][A-Za-z0-9_.-]*[.]sql"
                 r"|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?"
                 r"(Z|[+-][0-9]{2}:[0-9]{2}))$")
NAME_LIMIT = 40  # characters of metadata.name
DATABASE_LIMIT = 64  # MySQL's limit on a database name, once the image escapes its '_'


def _matches(pattern: str, value: Any) -> bool:
    """As Ansible's `regex` test: a search in the value's text."""
    return re.search(pattern, str(value)) is not None


def spec_problems(name: Any, *, password_set: bool, ref_set: bool, storage_size: Any,
                  database: Any, schedule: Any, schedule_fires: bool, keep: Any,
                  restore_from: Any, reserved_databases: Any = ()) -> list[str]:
    """Every problem of a MySQL object's input, each naming its field, in the order of the
    spec; [] when there is none. ``keep`` is spec.backup.keep or None when unset;
    ``restore_from`` as given (unset or empty means latest); ``reserved_databases``: the
    names spec.database cannot take (the server's own schemas, the operator's)."""
    problems = []
    if len(str(name)) > NAME_LIMIT or not _matches(_NAME, name):
        problems.append(f"metadata.name: '{name}' must be a DNS-1035 label of at most"
                        f" {NAME_LIMIT} characters (it names the Service, the Deployment and"
                        " the Jobs).")
    if password_set == ref_set:
        problems.append("spec.password / spec.passwordSecretRef: exactly one of them must be"
                        f" set (got {'both' if password_set else 'neither'}).")
    if not _matches(_QUANTITY, storage_size):
        problems.append(f"spec.storage_size: '{storage_size}' is not a Kubernetes quantity"
                        " such as 1Gi or 500Mi.")
    if not _matches(_DATABASE, database):
        problems.append(f"spec.database: '{database}' must be 1 to 64 letters, digits, '_',"
                        " '-' or '$'.")
    reserved = [str(d) for d in reserved_databases or ()]
    if str(database) in reserved:  # names are case-sensitive on Linux servers
        problems.append(f"spec.database: '{database}' is kept by the server or the operator"
                        f" (not one of: {', '.join(reserved)}).")
    # The official images' entrypoints (and ours) GRANT on `${MYSQL_DATABASE//_/\_}`: the
    # server refuses a name over 64 characters (ERROR 1102) and never starts. The CRD's CEL
    # rule refuses such a name; API servers without CEL validation let it through.
    escaped_length = len(str(database)) + str(database).count("_")
    if escaped_length > DATABASE_LIMIT:
        problems.append(f"spec.database: '{database}' is {escaped_length} characters long"
                        " once the server image escapes each '_' as '\\\\_' for its GRANT,"
                        f" more than the {DATABASE_LIMIT} a database name may have (use"
                        " fewer '_' or a shorter name).")
    if schedule and not schedule_fires:
        problems.append(f"spec.backup.schedule: '{schedule}' is not a cron schedule that fires"
                        " (five fields: minute hour day-of-month month day-of-week, or"
                        " @hourly, @daily, @weekly, @monthly, @yearly).")
    if keep is not None and do_int(keep) < 1:  # Jinja's `int`: 0 for what is no number
        problems.append(f"spec.backup.keep: {keep} must be at least 1.")
    restore_from = restore_from or "latest"
    if not _matches(_RESTORE_FROM, restore_from):
        problems.append(f"spec.restore_from: '{restore_from}' must be latest, none, the"
                        " name of a MySQLBackup, a backup file's name (<file>.sql) or a point"
                        " in time (RFC 3339, 2026-11-27T16:04:05Z).")
    return problems


def instance_parts(found: Any) -> dict[str, Any]:
    """The parts of a MySQL object (as the API server returns it) that the mysql_backup and
    mysql_restore roles use: its name and uid, database, image and backup settings, and its
    conditions; {} when it does not exist. Nothing else is kept: the object holds
    spec.password (and kopf's copy of the spec in an annotation), which must not reach the
    run's events."""
    if not found:
        return {}
    metadata, spec = found["metadata"], found["spec"]
    return {
        "metadata": {"name": metadata["name"], "uid": metadata["uid"]},
        "spec": {"database": spec["database"], "image": spec["image"],
                 "backup": spec.get("backup") or {}},
        "status": {"conditions": (found.get("status") or {}).get("conditions") or []},
    }


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "mysql_spec_problems": spec_problems,
            "mysql_instance_parts": instance_parts,
        }
