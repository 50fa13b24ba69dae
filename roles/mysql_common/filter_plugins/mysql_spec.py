"""Filters over the input of the three kinds: the problems of a MySQL object's spec that the
role reports before it touches anything (`mysql_spec_problems`, the mysql role's
tasks/validate.yml), of the strings any role hands to a Job (`mysql_value_problems`: a database,
an image, a backup file, a Job's or a Secret's name; `mysql_target_problems`: the bucket
settings), of a MySQLBackup's spec (`mysql_backup_problems`, the mysql_backup role's
tasks/validate.yml), and the parts of an instance the mysql_backup and mysql_restore roles
keep of it (`mysql_instance_parts`).

A string that reaches a Job's command line (a database name the clients take, a file name, a
bucket's settings) never starts with '-': the CRD's patterns refuse it, and these checks refuse
it again where the CRD is not in front (a direct playbook run, a value read from an object's
status or annotations, an object the API server keeps under an earlier schema).

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
# never a leading '-': the Jobs' clients (mysql, mysqldump) would read the name as an option
_DATABASE = r"^[A-Za-z0-9_$][A-Za-z0-9_$-]{0,63}$"
# an image reference starts with a letter or a digit (its registry or its name)
_IMAGE = r"^[A-Za-z0-9][^\s]{0,511}$"
_FILE = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,248}[.]sql$"
_JOB = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
_ENDPOINT = r"^https?://[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]{1,5})?/?$"
_BUCKET = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
_PREFIX = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$"
_REGION = r"^[a-z0-9][a-z0-9-]{0,63}$"
_LINEAGE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# kind of value -> (its pattern, what it must be, in the words of a problem)
KINDS = {
    "database": (_DATABASE, "1 to 64 letters, digits, '_', '-' or '$', not starting with '-'"),
    "image": (_IMAGE, "an image reference: no spaces, starting with a letter or a digit, at"
                      " most 512 characters"),
    "file": (_FILE, "a backup file's name: letters, digits, '_', '.' and '-', ending in .sql,"
                    " starting with a letter, a digit or '_'"),
    "job": (_JOB, "a Job's name: a DNS label of at most 63 characters"),
    "secret": (_SUBDOMAIN, "a Secret's name: a DNS subdomain"),
    "endpoint": (_ENDPOINT, "an http:// or https:// URL of a host (and a port), nothing after it"),
    "bucket": (_BUCKET, "a bucket's name: 3 to 63 lower-case letters, digits, '.' and '-'"),
    "prefix": (_PREFIX, "names of letters, digits, '_', '.' and '-' separated by '/', each starting"
                        " with a letter, a digit or '_'"),
    "region": (_REGION, "lower-case letters, digits and '-', not starting with '-'"),
    "lineage": (_LINEAGE, "an instance's <namespace>/<name>"),
}
# the bucket settings (mysql_backup_target's keys) that reach a Job, each with its kind, its
# field under a MySQL object's spec.backup, and whether it may be empty
_TARGET = (
    ("endpoint", "endpoint", "s3.endpoint", False),
    ("bucket", "bucket", "s3.bucket", False),
    ("prefix", "prefix", "s3.prefix", False),
    ("region", "region", "s3.region", False),
    ("credentials_secret", "secret", "s3.credentialsSecret", False),
    ("encryption_secret", "secret", "encryptionSecret", True),
    ("instance", "lineage", "", False),
)
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


def value_problems(checks: Any) -> list[str]:
    """The problems of ``checks``, a list of [field, kind, value] (kind: a key of KINDS), each
    naming its field; [] when every value is of its kind."""
    problems = []
    for field, kind, value in checks or []:
        pattern, shape = KINDS[kind]
        if not _matches(pattern, value if value is not None else ""):
            problems.append(f"{field}: '{value}' must be {shape}.")
    return problems


def target_problems(target: Any, where: str, *, recorded: bool = False) -> list[str]:
    """The problems of a bucket target (mysql_backup_target's dict; {}: none, no problem).
    ``where`` holds the settings: a MySQL object's spec.backup (each problem names the field
    under it), or with ``recorded`` the status of a backup record that keeps the target as
    JSON (each problem names the key)."""
    if not target:
        return []
    if not isinstance(target, dict):
        return [f"{where}: must be the settings of a bucket (a JSON object)."]
    checks = []
    for key, kind, field, optional in _TARGET:
        value = target.get(key)
        # (a key a record's status does not have: nothing of it reaches a Job)
        if key not in target or (optional and not value) or (key == "instance" and not recorded):
            continue
        checks.append([f"{where}.{key if recorded else field}", kind, value])
    return value_problems(checks)


def backup_problems(record: Any, *, file: Any, job: Any, image: Any, database: Any,
                    target_field: str, recorded: bool) -> list[str]:
    """Every problem of a MySQLBackup's input, each naming its field; [] when there is none.
    ``file``, ``job``, ``image`` and ``database`` are its spec's as given ('' when unset);
    ``record`` is what the role makes of them (mysql_backup_record: the file and Jobs it names,
    the database and image from the spec, else the status, else the instance) and its bucket
    target, whose settings ``target_field`` holds (``recorded``: the record's status)."""
    record = record if isinstance(record, dict) else {}
    problems = []
    if not file and (job or image or database):
        # the CRD's CEL rule, for API servers that do not evaluate it: without a file the role
        # takes the backup itself, in the instance's image, with its root password
        problems.append("spec.job, spec.image and spec.database describe spec.file and are set only"
                        " with it: a backup taken now names spec.instance (and, if need be,"
                        " spec.verify) alone.")
    # the database and the image come from the status or the instance when the spec has none
    inherited = " (from the status or the instance's spec)"
    checks = [["spec.file", "file", record.get("file")],
              ["spec.job", "job", record.get("dump_job")]]
    if record.get("database"):
        checks.append(["spec.database" + ("" if database else inherited), "database",
                       record["database"]])
    if record.get("image"):
        checks.append(["spec.image" + ("" if image else inherited), "image", record["image"]])
    return (problems + value_problems(checks)
            + target_problems(record.get("target"), target_field, recorded=recorded))


def spec_problems(name: Any, *, password_set: bool, ref_set: bool, storage_size: Any,
                  database: Any, schedule: Any, schedule_fires: bool, keep: Any,
                  restore_from: Any, image: Any = None, reserved_databases: Any = ()) -> list[str]:
    """Every problem of a MySQL object's input, each naming its field, in the order of the
    spec; [] when there is none. ``keep`` is spec.backup.keep or None when unset;
    ``restore_from`` as given (unset or empty means latest); ``image`` spec.image (None: not
    checked); ``reserved_databases``: the names spec.database cannot take (the server's own
    schemas, the operator's)."""
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
    if image is not None:
        problems += value_problems([["spec.image", "image", image]])
    problems += value_problems([["spec.database", "database", database]])
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
            "mysql_value_problems": value_problems,
            "mysql_target_problems": target_problems,
            "mysql_backup_problems": backup_problems,
            "mysql_instance_parts": instance_parts,
        }
