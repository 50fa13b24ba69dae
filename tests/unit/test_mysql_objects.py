"""mysql_common's filter_plugins/mysql_objects.py: the bucket a spec names, and the
container and volumes that ship a backup there or fetch it back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests import sources

ROOT = Path(__file__).resolve().parents[2]
objects = sources.load(ROOT / "roles/mysql_common/filter_plugins/mysql_objects.py", "mysql_objects")

SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


def test_no_bucket_is_the_backup_volume_alone() -> None:
    assert objects.backup_target({}, "ns", "db") == {}
    assert objects.backup_target({"schedule": "@daily", "keep": 3}, "ns", "db") == {}
    assert objects.backup_target(None, "ns", "db") == {}
    assert objects.objects_volumes({}) == []


def test_the_object_spelling_and_the_sdk_spelling_name_the_same_target() -> None:
    written = {"s3": {"endpoint": "https://s3.example", "bucket": "b", "credentialsSecret": "creds",
                      "insecureSkipTLSVerify": True}, "encryptionSecret": "key"}
    handed = {"s3": {"endpoint": "https://s3.example", "bucket": "b", "credentials_secret": "creds",
                     "insecure_skip_tls_verify": True}, "encryption_secret": "key"}
    target = objects.backup_target(written, "ns", "db")
    assert target == objects.backup_target(handed, "ns", "db")
    assert target["prefix"] == "ns/db"
    assert target["region"] == "us-east-1"
    assert target["insecure"] is True
    assert target["encryption_secret"] == "key"
    assert target["url"] == "s3://b/ns/db"


def test_a_given_prefix_loses_its_outer_slashes() -> None:
    target = objects.backup_target({"s3": {"endpoint": "http://e:8333", "bucket": "b", "prefix": "/team/a/",
                                           "region": "eu-west-1", "credentialsSecret": "c"}}, "ns", "db")
    assert (target["prefix"], target["region"], target["encryption_secret"]) == ("team/a", "eu-west-1", "")


def test_the_credentials_reach_the_container_as_secret_references_only() -> None:
    target = objects.backup_target({"s3": {"endpoint": "http://e:8333", "bucket": "b", "credentialsSecret": "creds"},
                                    "encryptionSecret": "key"}, "ns", "db")
    container = objects.objects_container(target, "ship", "x.sql", "tools:1", SECURITY)
    env = env_of(container)
    assert env["MODE"] == "ship" and env["BACKUP_FILE"] == "x.sql"
    assert env["RCLONE_S3_ACCESS_KEY_ID"] == {"secretKeyRef": {"name": "creds", "key": "AWS_ACCESS_KEY_ID"}}
    assert env["RCLONE_S3_SECRET_ACCESS_KEY"] == {"secretKeyRef": {"name": "creds", "key": "AWS_SECRET_ACCESS_KEY"}}
    assert env["RCLONE_NO_CHECK_CERTIFICATE"] == "false"
    assert container["securityContext"] == SECURITY
    assert container["command"][:2] == ["/bin/sh", "-c"] and "MODE" in container["command"][2]
    assert {"name": "backup-key", "mountPath": "/keys", "readOnly": True} in container["volumeMounts"]
    key = next(v for v in objects.objects_volumes(target) if v["name"] == "backup-key")
    assert key["secret"]["secretName"] == "key"
    assert key["secret"]["items"] == [{"key": "identity", "path": "identity"}]


def test_a_scheduled_backup_is_named_after_its_job_and_a_prune_lists_its_files() -> None:
    target = objects.backup_target({"s3": {"endpoint": "http://e", "bucket": "b", "credentialsSecret": "c"}}, "n", "d")
    scheduled = env_of(objects.objects_container(target, "ship", "", "tools:1", SECURITY))
    assert "BACKUP_FILE" not in scheduled
    assert scheduled["JOB_NAME"] == {"fieldRef": {"fieldPath": "metadata.labels['job-name']"}}
    pruned = env_of(objects.objects_container(target, "prune", ["a.sql", "b.sql"], "tools:1", SECURITY))
    assert pruned["FILES"] == "a.sql\nb.sql"
    assert [v["name"] for v in objects.objects_volumes(target)] == ["objects-tmp"]


def test_a_point_in_time_is_replayed_up_to_its_whole_second_in_utc() -> None:
    assert objects.point_in_time("2026-11-27T16:04:05Z") == {
        "until": 1795795446, "stop": "2026-11-27 16:04:06", "at": "2026-11-27T16:04:05Z"}
    # an offset and a fraction: the same second in UTC, and every event of that second
    assert objects.point_in_time("2026-11-27T18:04:05.250+02:00")["stop"] == "2026-11-27 16:04:06"
    for other in ("latest", "none", "bk-1", "db-20261127T160405Z.sql", "2026-11-27 16:04:05", "", None):
        assert objects.point_in_time(other) == {}


def test_a_point_in_time_reaches_the_fetch_as_seconds_since_the_epoch() -> None:
    target = objects.backup_target({"s3": {"endpoint": "http://s3:8333", "bucket": "b", "credentialsSecret": "c"}},
                                   "ns", "db")
    fetch = objects.objects_container(target, "fetch", "2026-11-27T16:04:05Z", "tools", SECURITY)
    assert env_of(fetch)["POINT_IN_TIME"] == "1795795446"
    assert "BACKUP_FILE" not in env_of(fetch)


def test_archived_binary_logs_add_two_sidecars_that_share_one_scratch_volume() -> None:
    s3 = {"endpoint": "http://s3:8333", "bucket": "b", "credentialsSecret": "c"}
    off = objects.backup_target({"s3": s3, "pointInTime": {"enabled": False}}, "ns", "db")
    assert off["archive_seconds"] == 0
    assert objects.archive_containers(off, "mysql", "tools", SECURITY, "Never", 3306, "ops") == []
    assert objects.archive_volumes(off) == []
    on = objects.backup_target({"s3": s3, "point_in_time": {"enabled": True}}, "ns", "db")
    assert on["archive_seconds"] == objects.DEFAULT_ARCHIVE_SECONDS
    rotate, archive = objects.archive_containers(on, "mysql", "tools", SECURITY, "Never", 3306, "ops")
    assert (rotate["name"], rotate["image"], archive["name"], archive["image"]) == (
        "binlog-rotate", "mysql", "binlog-archive", "tools")
    assert env_of(archive)["MODE"] == "archive"
    assert env_of(rotate)["ARCHIVE_SECONDS"] == env_of(archive)["ARCHIVE_SECONDS"] == "30"
    data = next(m for m in archive["volumeMounts"] if m["name"] == "data")
    assert data == {"name": "data", "mountPath": "/var/lib/mysql", "readOnly": True}
    names = {v["name"] for v in objects.archive_volumes(on)}
    mounted = {m["name"] for c in (rotate, archive) for m in c["volumeMounts"]} - {"data", "credentials"}
    assert mounted <= names


def test_both_restore_jobs_run_the_one_restore_script() -> None:
    script = objects.restore_script(None)
    assert script.startswith("# Replace the contents of $MYSQL_DATABASE") and "replicate-wild-do-table" in script


def test_a_job_with_a_bucket_hands_its_backup_over_in_scratch_space_never_the_backup_volume() -> None:
    target = objects.backup_target({"s3": {"endpoint": "http://s3", "bucket": "b", "credentialsSecret": "c"}},
                                   "ns", "db")
    assert objects.backup_volume(target, "db-backup-pvc") == {"name": "backup", "emptyDir": {}}
    assert objects.backup_volume({}, "db-backup-pvc") == {
        "name": "backup", "persistentVolumeClaim": {"claimName": "db-backup-pvc"}}


def test_the_target_names_the_instance_whose_backups_it_prefers() -> None:
    """The lineage a point-in-time fetch prefers: the instance's <namespace>/<name>, whatever
    the prefix (a disaster-recovery copy given the original's prefix is still itself)."""
    target = objects.backup_target({"s3": {"endpoint": "http://e", "bucket": "b", "prefix": "prod/db",
                                           "credentialsSecret": "c"}}, "dr", "db")
    assert (target["prefix"], target["instance"]) == ("prod/db", "dr/db")


def test_a_point_in_time_fetch_gets_the_restores_database_and_instance() -> None:
    target = objects.backup_target({"s3": {"endpoint": "http://e", "bucket": "b", "credentialsSecret": "c"}},
                                   "ns", "db")
    fetch = env_of(objects.objects_container(target, "fetch", "2026-11-27T16:04:05Z", "tools", SECURITY,
                                             database="app$1"))
    assert (fetch["MYSQL_DATABASE"], fetch["MYSQL_INSTANCE"]) == ("app$1", "ns/db")
    # a named file or a shipped backup chooses nothing
    for mode, file in (("fetch", "x.sql"), ("ship", "x.sql"), ("ship", "")):
        env = env_of(objects.objects_container(target, mode, file, "tools", SECURITY, database="app"))
        assert "MYSQL_DATABASE" not in env and "MYSQL_INSTANCE" not in env
