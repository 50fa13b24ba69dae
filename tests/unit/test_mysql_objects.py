"""mysql_common's filter_plugins/mysql_objects.py: the bucket a spec names, the Secrets it
needs, the container and volumes that ship a backup there or fetch it back, and the point in
time a restore names."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

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
    # its writes go to its volumes only (/tmp is the emptyDir objects-tmp)
    assert container["securityContext"] == {**SECURITY, "readOnlyRootFilesystem": True}
    assert {"name": "objects-tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert container["command"][:2] == ["/bin/sh", "-c"] and "MODE" in container["command"][2]
    assert {"name": "backup-key", "mountPath": "/keys", "readOnly": True} in container["volumeMounts"]
    key = next(v for v in objects.objects_volumes(target) if v["name"] == "backup-key")
    assert key["secret"]["secretName"] == "key"
    assert key["secret"]["items"] == [{"key": "identity", "path": "identity"}]


def test_the_container_gets_the_resources_it_is_given() -> None:
    target = objects.backup_target({"s3": {"endpoint": "http://e", "bucket": "b", "credentialsSecret": "c"}}, "n", "d")
    wanted = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}
    assert objects.objects_container(target, "fetch", "x.sql", "tools", SECURITY, resources=wanted)["resources"] == wanted
    assert "resources" not in objects.objects_container(target, "fetch", "x.sql", "tools", SECURITY)


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
    # both write to their pod's volumes only, and say what they may use
    for sidecar in (rotate, archive):
        assert sidecar["securityContext"] == {**SECURITY, "readOnlyRootFilesystem": True}
        assert set(sidecar["resources"]) == {"requests", "limits"}
        assert all(set(part) == {"cpu", "memory"} for part in sidecar["resources"].values())
    assert {m["mountPath"]: m["name"] for m in rotate["volumeMounts"]}["/tmp"] == "rotate-tmp"
    assert {m["mountPath"]: m["name"] for m in archive["volumeMounts"]}["/tmp"] == "objects-tmp"


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


@pytest.mark.parametrize(("value", "reason"), [
    ("2026-02-30T12:00:00Z", "day is out of range for month"),
    ("2026-13-01T12:00:00Z", "month must be in 1..12"),
    ("2026-11-27T24:00:00Z", "hour must be in 0..23"),
    ("2026-12-31T23:59:60Z", "second must be in 0..59"),
    ("2026-11-27T16:04:05+24:00", "the offset +24:00 is not one: hours 00 to 23, minutes 00 to 59"),
    ("2026-11-27T16:04:05+02:60", "the offset +02:60 is not one"),
    ("9999-12-31T23:59:59Z", "out of the range of dates, years 1 to 9999 in UTC"),
    ("0001-01-01T00:30:00+01:00", "out of the range of dates"),
])
def test_a_time_of_the_right_shape_that_does_not_exist_is_a_problem_naming_the_field(value: str,
                                                                                    reason: str) -> None:
    """The CRD's pattern admits it; the filter neither raises (a ValueError ended the run)
    nor takes it for a point in time, and the problem names the field."""
    assert objects.point_in_time(value) == {}
    problem = objects.point_in_time_problem(value, "spec.restore_from")
    assert problem.startswith(f"spec.restore_from: '{value}' is not a time that exists (")
    assert reason in problem and problem.endswith("; a point in time is RFC 3339, 2026-11-27T16:04:05Z.")
    assert objects.point_in_time_problem(value, "spec.pointInTime").startswith("spec.pointInTime: ")
    target = objects.backup_target({"s3": {"endpoint": "http://e", "bucket": "b", "credentialsSecret": "c"}}, "n", "d")
    assert "POINT_IN_TIME" not in env_of(objects.objects_container(target, "fetch", value, "tools", SECURITY))


def test_a_time_that_exists_or_no_time_at_all_is_no_problem_of_this_filter() -> None:
    for value in ("2028-02-29T23:59:59Z", "2026-11-27T18:04:05.250+02:00", "latest", "bk-1", "x.sql", "", None):
        assert objects.point_in_time_problem(value, "spec.restore_from") == ""


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


CREDENTIALS = {"data": {"AWS_ACCESS_KEY_ID": b64("id"), "AWS_SECRET_ACCESS_KEY": b64("secret")}}
IDENTITY = {"data": {"identity": b64("# created: 2026-01-01\n# public key: age1x\nAGE-SECRET-KEY-1QQQ9ZZ\n")}}


def test_the_secrets_of_a_bucket_are_checked_for_the_keys_the_pods_read() -> None:
    s3 = {"endpoint": "http://e", "bucket": "b", "credentialsSecret": "s3-creds"}
    plain = objects.backup_target({"s3": s3}, "ns", "db")
    keyed = objects.backup_target({"s3": s3, "encryptionSecret": "backup-key"}, "ns", "db")
    assert objects.backup_secret_problems({}, {}, {}, "ns") == []
    assert objects.backup_secret_problems(plain, CREDENTIALS, {}, "ns") == []
    assert objects.backup_secret_problems(keyed, CREDENTIALS, IDENTITY, "ns") == []
    crlf = {"data": {"identity": b64("# public key: age1x\r\nAGE-SECRET-KEY-1QQQ9ZZ\r\n")}}
    assert objects.backup_secret_problems(keyed, CREDENTIALS, crlf, "ns") == []
    assert objects.backup_secret_problems(keyed, {}, {}, "ns") == [
        "spec.backup.s3.credentialsSecret: secret 's3-creds' not found in namespace 'ns'.",
        "spec.backup.encryptionSecret: secret 'backup-key' not found in namespace 'ns'."]
    partial = {"data": {"AWS_ACCESS_KEY_ID": b64("id"), "AWS_SECRET_ACCESS_KEY": "", "other": b64("x")}}
    assert objects.backup_secret_problems(plain, partial, {}, "ns") == [
        "spec.backup.s3.credentialsSecret: secret 's3-creds' in namespace 'ns' has no non-empty key"
        " 'AWS_SECRET_ACCESS_KEY'."]
    assert objects.backup_secret_problems(plain, {"data": None}, {}, "ns") == [
        "spec.backup.s3.credentialsSecret: secret 's3-creds' in namespace 'ns' has no non-empty key"
        " 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'."]
    assert objects.backup_secret_problems(keyed, CREDENTIALS, {"data": {"key": b64("AGE-SECRET-KEY-1QQ")}}, "ns") == [
        "spec.backup.encryptionSecret: secret 'backup-key' in namespace 'ns' has no non-empty key 'identity'."]
    assert objects.backup_secret_problems(keyed, CREDENTIALS, {"data": {"identity": b64("age1public")}}, "ns") == [
        "spec.backup.encryptionSecret: key 'identity' of secret 'backup-key' in namespace 'ns' is not an age"
        " identity (a line AGE-SECRET-KEY-1..., as age-keygen writes it)."]


def test_the_keys_checked_are_the_keys_the_containers_read() -> None:
    """One list of key names for both: what the check asks for is what the pods reference."""
    target = objects.backup_target({"s3": {"endpoint": "http://e", "bucket": "b", "credentialsSecret": "c"},
                                    "encryptionSecret": "k"}, "ns", "db")
    env = env_of(objects.objects_container(target, "ship", "x.sql", "tools", SECURITY))
    referenced = {ref["secretKeyRef"]["key"] for ref in env.values()
                  if isinstance(ref, dict) and "secretKeyRef" in ref}
    assert referenced == set(objects.CREDENTIAL_KEYS)
    key = next(v for v in objects.objects_volumes(target) if v["name"] == "backup-key")
    assert [item["key"] for item in key["secret"]["items"]] == [objects.IDENTITY_KEY]
    archive = objects.archive_containers(objects.backup_target(
        {"s3": {"endpoint": "http://e", "bucket": "b", "credentialsSecret": "c"}, "encryptionSecret": "k",
         "pointInTime": {"enabled": True}}, "ns", "db"), "mysql", "tools", SECURITY, "Never", 3306, "ops")[1]
    assert {ref["secretKeyRef"]["key"] for ref in env_of(archive).values()
            if isinstance(ref, dict) and "secretKeyRef" in ref} == set(objects.CREDENTIAL_KEYS)
