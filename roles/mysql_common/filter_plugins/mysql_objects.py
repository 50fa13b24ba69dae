"""Filters for backups kept in an S3-compatible bucket (spec.backup.s3): the target an
instance's spec names (`mysql_backup_target`), and the parts of a Job's pod that ship a
backup there or fetch one from there (`mysql_objects_container`, `mysql_objects_volumes`).

Every Job that takes a backup (on demand, scheduled, at deletion) writes it to the backup
volume first, as without a bucket, then a second container of the same pod runs
files/objects.sh from the backup-tools image to compress, encrypt and upload it and to read
it back; a restore from a bucket fetches it into the pod's own scratch volume before the
server image loads it. Python rather than Jinja: the spec comes camelCase from the object
and snake_case from the SDK's extra vars, and the container is one dict of many parts.
The credentials reach the container as Secret references only, never as values.
"""

from __future__ import annotations

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


def _first(spec: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if spec.get(name) not in (None, ""):
            return spec[name]
    return None


def backup_target(backup: Any, namespace: str, name: str) -> dict[str, Any]:
    """The bucket an instance's backups go to, {} for the backup volume alone: endpoint,
    bucket, prefix (default <namespace>/<name>, without slashes at either end), region
    (default us-east-1), credentials_secret, insecure (skip TLS verification) and
    encryption_secret ('' when backups are not encrypted)."""
    if not isinstance(backup, dict):
        return {}
    s3 = backup.get("s3")
    if not isinstance(s3, dict) or not s3:
        return {}
    values = {key: _first(s3, names) for key, names in _KEYS.items()}
    prefix = str(values["prefix"] or f"{namespace}/{name}").strip("/")
    return {
        "endpoint": str(values["endpoint"] or ""),
        "bucket": str(values["bucket"] or ""),
        "prefix": prefix,
        "region": str(values["region"] or "us-east-1"),
        "credentials_secret": str(values["credentials_secret"] or ""),
        "insecure": bool(values["insecure"]),
        "encryption_secret": str(_first(backup, _ENCRYPTION) or ""),
        "url": f"s3://{values['bucket']}/{prefix}",
    }


def objects_container(  # noqa: PLR0917 - a Jinja filter's arguments are positional
        target: dict[str, Any], mode: str, backup_file: Any, image: str,
        security_context: dict[str, Any], pull_policy: str = "IfNotPresent") -> dict[str, Any]:
    """The container that runs files/objects.sh in MODE (ship, fetch or prune) for
    BACKUP_FILE (for prune, a list of files), the backup volume at /backup. An empty
    BACKUP_FILE is <the Job's name>.sql, as backup.sh names a scheduled backup."""
    file_env: dict[str, Any] = {"name": "BACKUP_FILE", "value": str(backup_file or "")}
    if mode == "prune":
        file_env = {"name": "FILES", "value": "\n".join(backup_file or [])}
    elif not backup_file:
        file_env = {"name": "JOB_NAME",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['job-name']"}}}
    secret = target["credentials_secret"]
    env = [
        {"name": "MODE", "value": mode},
        file_env,
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
        }
