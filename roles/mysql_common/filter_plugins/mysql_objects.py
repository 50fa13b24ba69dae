"""Filters for backups kept in an S3-compatible bucket (spec.backup.s3): the target an
instance's spec names (`mysql_backup_target`), the parts of a Job's pod that ship a
backup there or fetch one from there (`mysql_objects_container`, `mysql_objects_volumes`),
the server pod's sidecars that archive its binary logs there (`mysql_archive_containers`,
spec.backup.pointInTime), the point in time a restore is asked for
(`mysql_point_in_time`) and the script that restores a backup, and a point in time, into an
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
values.
"""

from __future__ import annotations

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


def point_in_time(value: Any) -> dict[str, Any]:
    """A point in time spec.restore_from names (RFC 3339), {} for anything else: ``until``,
    the first whole second after it, in seconds since the epoch (the restore replays every
    event of the binary logs whose time is before it: at or before the given second), and
    ``stop``, the same as UTC "YYYY-MM-DD HH:MM:SS" (mysqlbinlog's --stop-datetime, read in
    the time zone UTC), and ``at``, the time as given."""
    text = str(value or "")
    if not _RFC3339.match(text):
        return {}
    when = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    until = when.replace(microsecond=0) + timedelta(seconds=1)
    return {"until": int(until.timestamp()), "stop": until.strftime("%Y-%m-%d %H:%M:%S"),
            "at": text}


def objects_container(  # noqa: PLR0917 - a Jinja filter's arguments are positional
        target: dict[str, Any], mode: str, backup_file: Any, image: str,
        security_context: dict[str, Any], pull_policy: str = "IfNotPresent",
        database: Any = "") -> dict[str, Any]:
    """The container that runs files/objects.sh in MODE (ship, fetch or prune) for
    BACKUP_FILE (for prune, a list of files), the backup volume at /backup. An empty
    BACKUP_FILE is <the Job's name>.sql, as backup.sh names a scheduled backup. A fetch for a
    point in time also gets the restore's ``database`` (MYSQL_DATABASE) and the restoring
    instance (MYSQL_INSTANCE, <namespace>/<name>): it chooses among the backups of that
    database, the instance's own first."""
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
         "valueFrom": {"secretKeyRef": {"name": secret, "key": "AWS_ACCESS_KEY_ID"}}},
        {"name": "RCLONE_S3_SECRET_ACCESS_KEY",
         "valueFrom": {"secretKeyRef": {"name": secret, "key": "AWS_SECRET_ACCESS_KEY"}}},
        {"name": "RCLONE_NO_CHECK_CERTIFICATE", "value": "true" if target["insecure"] else "false"},
        {"name": "HOME", "value": _SCRATCH},
    ]
    mounts: list[dict[str, Any]] = [{"name": "backup", "mountPath": "/backup"},
                                    {"name": "objects-tmp", "mountPath": _SCRATCH}]
    if target.get("encryption_secret"):
        mounts.append({"name": "backup-key", "mountPath": "/keys", "readOnly": True})
    return {
        "name": "objects",
        "image": image,
        "imagePullPolicy": pull_policy,
        "securityContext": security_context,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "command": ["/bin/sh", "-c", _SCRIPT.read_text(encoding="utf-8")],
        "env": env,
        "volumeMounts": mounts,
    }


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
    small = {"requests": {"cpu": "10m", "memory": "32Mi"}}
    archive["resources"] = small
    rotate = {
        "name": "binlog-rotate",
        "image": server_image,
        "imagePullPolicy": pull_policy,
        "securityContext": security_context,
        "command": ["/bin/sh", "-c", _ROTATE_SCRIPT.read_text(encoding="utf-8")],
        "env": [seconds, {"name": "MYSQL_OPERATOR_PORT", "value": str(port)},
                {"name": "MYSQL_OPERATOR_SCHEMA", "value": operator_schema}],
        "resources": small,
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
            "items": [{"key": "identity", "path": "identity"}]}})
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
            "mysql_restore_script": restore_script,
        }
