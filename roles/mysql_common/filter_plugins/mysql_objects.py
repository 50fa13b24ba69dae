"""Filters for backups kept in an S3-compatible bucket (spec.backup.s3): the target an
instance's spec names (`mysql_backup_target`), the parts of a Job's pod that ship a
backup there or fetch one from there (`mysql_objects_container`, `mysql_objects_volumes`),
the server pod's sidecars that archive its binary logs there (`mysql_archive_containers`,
spec.backup.pointInTime), the point in time a restore is asked for (`mysql_point_in_time`,
and `mysql_point_in_time_problem` for a time of the right shape that does not exist), what is
wrong with the Secrets the target names (`mysql_backup_secret_problems`: the keys the
containers read from them) and the script that restores a backup, and a point in time, into an
instance's database (`mysql_restore_script`: files/restore.sh).

Every Job that takes a backup (on demand, scheduled, at deletion) streams it from its dump
container (the server image's mysqldump, the mysql_backup role's files/backup.sh with
SHIP_TO set) to a second container of the same pod that runs files/objects.sh from the
backup-tools image to compress, encrypt and upload it as it comes and to read it back: the
pod's own scratch volume (`mysql_objects_backup_volume`) holds only the hand-over, never
the dump. A restore or a verification from a bucket fetches the backup into the pod's own
scratch volume before the server image loads it. Python rather than Jinja: the spec comes
camelCase from the object and snake_case from the SDK's extra vars, and the container is one
dict of many parts. The credentials reach the container as Secret references only, never as
values. Every container made here writes only to volumes of its pod (objects.sh's scratch
space is the emptyDir objects-tmp at /tmp, binlog_rotate.sh's rotate-tmp): its image's own
files are read-only (readOnlyRootFilesystem).
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

_SCRIPT = Path(__file__).resolve().parent.parent / "files" / "objects.sh"
# the container's own emptyDir (objects-tmp): mktemp's and rclone's scratch space
_SCRATCH = "/tmp"  # noqa: S108 - an emptyDir of the pod's own, not a shared /tmp

# spec.backup.s3 keys as written (camelCase) and as the SDK hands them to a role (snake_case)
_KEYS = {
    "endpoint": ("endpoint",),
    "bucket": ("bucket",),
    "prefix": ("prefix",),
    "region": ("region",),
    "credentials_secret": ("credentialsSecret", "credentials_secret"),
    "insecure": ("insecureSkipTLSVerify", "insecure_skip_tls_verify", "insecure_skip_tlsverify"),
}
_ENCRYPTION = ("encryptionSecret", "encryption_secret")
# the keys the containers read: the credentials Secret's (as environment) and the encryption
# Secret's (mounted as /keys/identity, which age-keygen -y and age -d -i read)
CREDENTIAL_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
IDENTITY_KEY = "identity"
_AGE_IDENTITY = re.compile(r"^AGE-SECRET-KEY-1[0-9A-Z]+\r?$", re.MULTILINE)
_POINT_IN_TIME = ("pointInTime", "point_in_time")
_ARCHIVE_SECONDS = ("archiveSeconds", "archive_seconds")
DEFAULT_ARCHIVE_SECONDS = 30
_ROTATE_SCRIPT = Path(__file__).resolve().parents[2] / "mysql" / "files" / "binlog_rotate.sh"
_RESTORE_SCRIPT = Path(__file__).resolve().parent.parent / "files" / "restore.sh"
# RFC 3339, as the CRD's pattern for spec.restore_from has it
_RFC3339 = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?"
                      r"(Z|[+-][0-9]{2}:[0-9]{2})$")


def _first(spec: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if spec.get(name) not in (None, ""):
            return spec[name]
    return None


def backup_target(backup: Any, namespace: str, name: str) -> dict[str, Any]:
    """The bucket an instance's backups go to, {} for the backup volume alone: endpoint,
    bucket, prefix (default <namespace>/<name>, without slashes at either end), region
    (default us-east-1), credentials_secret, insecure (skip TLS verification),
    encryption_secret ('' when backups are not encrypted) and instance, <namespace>/<name>:
    the lineage a point-in-time fetch prefers (the instance's own backups in the prefix)."""
    if not isinstance(backup, dict):
        return {}
    s3 = backup.get("s3")
    if not isinstance(s3, dict) or not s3:
        return {}
    values = {key: _first(s3, names) for key, names in _KEYS.items()}
    prefix = str(values["prefix"] or f"{namespace}/{name}").strip("/")
    point_in_time = _first(backup, _POINT_IN_TIME)
    archive_seconds = 0
    if isinstance(point_in_time, dict) and point_in_time.get("enabled"):
        archive_seconds = int(_first(point_in_time, _ARCHIVE_SECONDS) or DEFAULT_ARCHIVE_SECONDS)
    return {
        "endpoint": str(values["endpoint"] or ""),
        "bucket": str(values["bucket"] or ""),
        "prefix": prefix,
        "region": str(values["region"] or "us-east-1"),
        "credentials_secret": str(values["credentials_secret"] or ""),
        "insecure": bool(values["insecure"]),
        "encryption_secret": str(_first(backup, _ENCRYPTION) or ""),
        "url": f"s3://{values['bucket']}/{prefix}",
        "archive_seconds": archive_seconds,
        "instance": f"{namespace}/{name}",
    }


def _until(text: str) -> datetime:
    """The first whole second after an RFC 3339 time (the shape _RFC3339 checked), in UTC;
    ValueError, saying why, for one that does not exist (2026-02-30, 24:00:00, a leap second,
    an offset of 24 hours or 60 minutes) or that UTC cannot hold (year 0, after 9999)."""
    offset = "" if text.endswith("Z") else text[-6:]
    if offset and (int(offset[1:3]) > 23 or int(offset[4:6]) > 59):  # noqa: PLR2004 - a clock
        message = f"the offset {offset} is not one: hours 00 to 23, minutes 00 to 59"
        raise ValueError(message)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
        return when.replace(microsecond=0) + timedelta(seconds=1)
    except OverflowError as error:
        message = "out of the range of dates, years 1 to 9999 in UTC"
        raise ValueError(message) from error


def point_in_time(value: Any) -> dict[str, Any]:
    """A point in time spec.restore_from names (RFC 3339), {} for anything else, a time that
    does not exist included (`point_in_time_problem` says why): ``until``, the first whole
    second after it, in seconds since the epoch (the restore replays every event of the binary
    logs whose time is before it: at or before the given second), and ``stop``, the same as
    UTC "YYYY-MM-DD HH:MM:SS" (mysqlbinlog's --stop-datetime, read in the time zone UTC), and
    ``at``, the time as given."""
    text = str(value or "")
    if not _RFC3339.match(text):
        return {}
    try:
        until = _until(text)
    except ValueError:
        return {}
    return {"until": int(until.timestamp()), "stop": until.strftime("%Y-%m-%d %H:%M:%S"),
            "at": text}


def point_in_time_problem(value: Any, field: str) -> str:
    """'' unless ``value`` has the shape of an RFC 3339 time (what the CRD's pattern admits)
    but names no time that exists, such as 2026-02-30T12:00:00Z: then the problem, naming
    ``field`` (spec.restore_from, spec.pointInTime)."""
    text = str(value or "")
    if not _RFC3339.match(text):
        return ""
    try:
        _until(text)
    except ValueError as error:
        return (f"{field}: '{text}' is not a time that exists ({error}); a point in time is"
                " RFC 3339, 2026-11-27T16:04:05Z.")
    return ""


def _secret_keys(secret: Any) -> dict[str, str]:
    """A Secret's keys with a non-empty value, each as text (base64-decoded)."""
    data = (secret or {}).get("data") or {}
    keys = {}
    for key, value in data.items():
        try:
            text = base64.b64decode(str(value or ""), validate=True).decode("utf-8", "replace")
        except ValueError:
            text = ""
        if text.strip():
            keys[str(key)] = text
    return keys


def backup_secret_problems(target: dict[str, Any], credentials: Any, encryption: Any,
                           namespace: str) -> list[str]:
    """What is wrong with the Secrets a bucket target names, each naming its field; [] when
    nothing is (and for no target). ``credentials`` and ``encryption`` are the Secrets as the
    API server returns them ({} when missing). The pods that reach the bucket read
    AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the first (environment) and an age
    identity from key `identity` of the second: without them a Job, or the server pod's
    archive sidecar, never starts its container. Only names and keys are told, never a value."""
    if not target:
        return []
    problems = []
    checks = [("spec.backup.s3.credentialsSecret", target.get("credentials_secret", ""),
               credentials, CREDENTIAL_KEYS)]
    if target.get("encryption_secret"):
        checks.append(("spec.backup.encryptionSecret", target["encryption_secret"], encryption,
                       (IDENTITY_KEY,)))
    for field, name, secret, wanted in checks:
        if not secret:
            problems.append(f"{field}: secret '{name}' not found in namespace '{namespace}'.")
            continue
        keys = _secret_keys(secret)
        missing = [key for key in wanted if key not in keys]
        if missing:
            problems.append(f"{field}: secret '{name}' in namespace '{namespace}' has no non-empty"
                            f" key {', '.join(repr(key) for key in missing)}.")
        elif IDENTITY_KEY in wanted and not _AGE_IDENTITY.search(keys[IDENTITY_KEY]):
            problems.append(f"{field}: key '{IDENTITY_KEY}' of secret '{name}' in namespace"
                            f" '{namespace}' is not an age identity (a line AGE-SECRET-KEY-1...,"
                            " as age-keygen writes it).")
    return problems


def objects_container(  # noqa: PLR0917 - a Jinja filter's arguments are positional
        target: dict[str, Any], mode: str, backup_file: Any, image: str,
        security_context: dict[str, Any], pull_policy: str = "IfNotPresent",
        database: Any = "", resources: Any = None) -> dict[str, Any]:
    """The container that runs files/objects.sh in MODE (ship, fetch or prune) for
    BACKUP_FILE (for prune, a list of files), the backup volume at /backup. An empty
    BACKUP_FILE is <the Job's name>.sql, as backup.sh names a scheduled backup. A fetch for a
    point in time also gets the restore's ``database`` (MYSQL_DATABASE) and the restoring
    instance (MYSQL_INSTANCE, <namespace>/<name>): it chooses among the backups of that
    database, the instance's own first. ``resources``: its requests and limits (a Job's:
    mysql_common's mysql_objects_resources); ``security_context`` gets a read-only root
    filesystem."""
    file_env: dict[str, Any] = {"name": "BACKUP_FILE", "value": str(backup_file or "")}
    lineage: list[dict[str, Any]] = []
    when = point_in_time(backup_file)
    if when:
        file_env = {"name": "POINT_IN_TIME", "value": str(when["until"])}
        lineage = [{"name": "MYSQL_DATABASE", "value": str(database or "")},
                   {"name": "MYSQL_INSTANCE", "value": str(target.get("instance", ""))}]
    elif mode == "prune":
        file_env = {"name": "FILES", "value": "\n".join(backup_file or [])}
    elif not backup_file:
        file_env = {"name": "JOB_NAME",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['job-name']"}}}
    secret = target["credentials_secret"]
    env = [
        {"name": "MODE", "value": mode},
        file_env,
        *lineage,
        {"name": "S3_BUCKET", "value": target["bucket"]},
        {"name": "S3_PREFIX", "value": target["prefix"]},
        {"name": "RCLONE_S3_PROVIDER", "value": "Other"},
        {"name": "RCLONE_S3_ENDPOINT", "value": target["endpoint"]},
        {"name": "RCLONE_S3_REGION", "value": target["region"]},
        {"name": "RCLONE_S3_ACCESS_KEY_ID",
         "valueFrom": {"secretKeyRef": {"name": secret, "key": CREDENTIAL_KEYS[0]}}},
        {"name": "RCLONE_S3_SECRET_ACCESS_KEY",
         "valueFrom": {"secretKeyRef": {"name": secret, "key": CREDENTIAL_KEYS[1]}}},
        {"name": "RCLONE_NO_CHECK_CERTIFICATE", "value": "true" if target["insecure"] else "false"},
        {"name": "HOME", "value": _SCRATCH},
    ]
    mounts: list[dict[str, Any]] = [{"name": "backup", "mountPath": "/backup"},
                                    {"name": "objects-tmp", "mountPath": _SCRATCH}]
    if target.get("encryption_secret"):
        mounts.append({"name": "backup-key", "mountPath": "/keys", "readOnly": True})
    container = {
        "name": "objects",
        "image": image,
        "imagePullPolicy": pull_policy,
        "securityContext": _read_only(security_context),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "command": ["/bin/sh", "-c", _SCRIPT.read_text(encoding="utf-8")],
        "env": env,
        "volumeMounts": mounts,
    }
    if resources:
        container["resources"] = dict(resources)
    return container


def _read_only(security_context: Any) -> dict[str, Any]:
    """A container's security context with its image's files read-only."""
    return {**(security_context or {}), "readOnlyRootFilesystem": True}


def restore_script(_: Any = None) -> str:
    """files/restore.sh: what the restore Job of a new instance (the mysql role) and the load
    Job of a MySQLRestore (the mysql_restore role) run in the server image."""
    return _RESTORE_SCRIPT.read_text(encoding="utf-8")


def archive_containers(  # noqa: PLR0917 - a Jinja filter's arguments are positional
        target: dict[str, Any], server_image: str, tools_image: str,
        security_context: dict[str, Any], pull_policy: str, port: Any,
        operator_schema: str) -> list[dict[str, Any]]:
    """The server pod's sidecars for spec.backup.pointInTime ([] without it): `binlog-rotate`
    (the server image, the mysql role's files/binlog_rotate.sh) closes the current binary
    log when it holds new events, `binlog-archive` (files/objects.sh, MODE=archive) ships
    closed logs from the data volume, read-only. They share the emptyDir `archive`."""
    if not target or not target.get("archive_seconds"):
        return []
    seconds = {"name": "ARCHIVE_SECONDS", "value": str(target["archive_seconds"])}
    archive = objects_container(target, "archive", "", tools_image, security_context, pull_policy)
    archive["name"] = "binlog-archive"
    archive["env"] = [*(e for e in archive["env"] if e["name"] not in {"BACKUP_FILE", "JOB_NAME"}),
                      seconds]
    archive["volumeMounts"] = [m for m in archive["volumeMounts"] if m["name"] != "backup"] + [
        {"name": "data", "mountPath": "/var/lib/mysql", "readOnly": True},
        {"name": "archive", "mountPath": "/archive", "readOnly": True}]
    # limits too: with spec.resources' limits on the server, a namespace whose ResourceQuota
    # counts limits admits the pod (zstd is the archive's CPU; the rotation's client reads a
    # whole log's events at once)
    sidecar = {"requests": {"cpu": "10m", "memory": "32Mi"},
               "limits": {"cpu": "500m", "memory": "256Mi"}}
    archive["resources"] = sidecar
    rotate = {
        "name": "binlog-rotate",
        "image": server_image,
        "imagePullPolicy": pull_policy,
        "securityContext": _read_only(security_context),
        "command": ["/bin/sh", "-c", _ROTATE_SCRIPT.read_text(encoding="utf-8")],
        "env": [seconds, {"name": "MYSQL_OPERATOR_PORT", "value": str(port)},
                {"name": "MYSQL_OPERATOR_SCHEMA", "value": operator_schema}],
        "resources": sidecar,
        "volumeMounts": [{"name": "archive", "mountPath": "/archive"},
                         {"name": "credentials", "mountPath": "/etc/mysql-operator/credentials",
                          "readOnly": True},
                         {"name": "rotate-tmp", "mountPath": _SCRATCH}],
    }
    return [rotate, archive]


def archive_volumes(target: dict[str, Any]) -> list[dict[str, Any]]:
    """The volumes of the archive sidecars beside the server pod's own ([] without them)."""
    if not target or not target.get("archive_seconds"):
        return []
    return [*objects_volumes(target), {"name": "archive", "emptyDir": {}},
            {"name": "rotate-tmp", "emptyDir": {}}]


def backup_volume(target: dict[str, Any], claim: str) -> dict[str, Any]:
    """The volume `backup` of a Job that takes, verifies or restores a backup: the backup
    volume's claim without a bucket, else the pod's own scratch space (an emptyDir), where
    the dump container and the objects container hand the backup over."""
    if target:
        return {"name": "backup", "emptyDir": {}}
    return {"name": "backup", "persistentVolumeClaim": {"claimName": claim}}


def objects_volumes(target: dict[str, Any]) -> list[dict[str, Any]]:
    """The volumes the objects container needs beside the backup volume: its scratch space
    and, for encrypted backups, the age identity (key `identity` of the Secret), readable
    by the pod's group only."""
    if not target:
        return []
    volumes: list[dict[str, Any]] = [{"name": "objects-tmp", "emptyDir": {}}]
    if target.get("encryption_secret"):
        volumes.append({"name": "backup-key", "secret": {
            "secretName": target["encryption_secret"], "defaultMode": 0o440,
            "items": [{"key": IDENTITY_KEY, "path": "identity"}]}})
    return volumes


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "mysql_backup_target": backup_target,
            "mysql_objects_container": objects_container,
            "mysql_objects_volumes": objects_volumes,
            "mysql_objects_backup_volume": backup_volume,
            "mysql_archive_containers": archive_containers,
            "mysql_archive_volumes": archive_volumes,
            "mysql_point_in_time": point_in_time,
            "mysql_point_in_time_problem": point_in_time_problem,
            "mysql_backup_secret_problems": backup_secret_problems,
            "mysql_restore_script": restore_script,
        }
