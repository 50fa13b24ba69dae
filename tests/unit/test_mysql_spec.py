"""mysql_common's filter_plugins/mysql_spec.py: the problems of a MySQL object's input, of
the strings the roles hand to Jobs and of a MySQLBackup's spec, in the words users read, and
the parts of an instance the backup and restore roles keep. Every string that reaches a Job's
command line is refused when it could read as an option (a leading '-')."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import sources

SOURCE = Path(__file__).resolve().parents[2] / "roles/mysql_common/filter_plugins/mysql_spec.py"

spec = sources.load(SOURCE, "mysql_spec")

GOOD: dict[str, Any] = {
    "password_set": True, "ref_set": False, "storage_size": "1Gi", "database": "app",
    "schedule": "", "schedule_fires": False, "keep": None, "restore_from": "", "image": "mysql:8.4",
}
# what the Jobs' clients would read as their own options (-h<address>: a login sent elsewhere,
# -e<statement>: a statement run as root, --init-command=: the same at each connection)
OPTIONS = ["-hevil", "-eSHUTDOWN", "--init-command=x", "-", "--"]
DATABASE_SHAPE = "must be 1 to 64 letters, digits, '_', '-' or '$', not starting with '-'."


def problems(name: str = "db", **changes: Any) -> list[str]:
    return list(spec.spec_problems(name, **{**GOOD, **changes}))


def test_a_good_spec_has_no_problem() -> None:
    assert problems() == []
    assert problems(schedule="@daily", schedule_fires=True, keep=3, restore_from="my-backup.1",
                    storage_size="1.5Gi") == []


@pytest.mark.parametrize(("changes", "problem"), [
    ({"name": "Db_1"}, "metadata.name: 'Db_1' must be a DNS-1035 label of at most 40 characters"
                       " (it names the Service, the Deployment and the Jobs)."),
    ({"name": "a" * 41}, f"metadata.name: '{'a' * 41}' must be a DNS-1035 label of at most 40"
                         " characters (it names the Service, the Deployment and the Jobs)."),
    ({"ref_set": True}, "spec.password / spec.passwordSecretRef: exactly one of them must be set (got both)."),
    ({"password_set": False}, "spec.password / spec.passwordSecretRef: exactly one of them must be set"
                              " (got neither)."),
    ({"storage_size": "1GB"}, "spec.storage_size: '1GB' is not a Kubernetes quantity such as 1Gi or 500Mi."),
    ({"database": "a b"}, f"spec.database: 'a b' {DATABASE_SHAPE}"),
    ({"image": "-x"}, "spec.image: '-x' must be an image reference: no spaces, starting with a letter or a"
                      " digit, at most 512 characters."),
    ({"schedule": "61 * * * *"}, "spec.backup.schedule: '61 * * * *' is not a cron schedule that fires"
                                 " (five fields: minute hour day-of-month month day-of-week, or @hourly,"
                                 " @daily, @weekly, @monthly, @yearly)."),
    ({"keep": 0}, "spec.backup.keep: 0 must be at least 1."),
    ({"keep": "abc"}, "spec.backup.keep: abc must be at least 1."),  # Jinja's int: 0
    ({"restore_from": "Bad_Name"}, "spec.restore_from: 'Bad_Name' must be latest, none, the name of"
                                   " a MySQLBackup, a backup file's name (<file>.sql) or a point in time"
                                   " (RFC 3339, 2026-11-27T16:04:05Z)."),
    ({"restore_from": "2026-11-27 16:04:05"}, "spec.restore_from: '2026-11-27 16:04:05' must be latest, none,"
                                              " the name of a MySQLBackup, a backup file's name (<file>.sql)"
                                              " or a point in time (RFC 3339, 2026-11-27T16:04:05Z)."),
])
def test_each_problem_names_its_field(changes: dict[str, Any], problem: str) -> None:
    assert problems(**changes) == [problem]


def test_a_name_the_image_escapes_past_64_characters_is_refused() -> None:
    assert problems(database="_" * 32) == []  # 64 once escaped
    assert problems(database="_" * 33) == [
        f"spec.database: '{'_' * 33}' is 66 characters long once the server image escapes each '_'"
        " as '\\\\_' for its GRANT, more than the 64 a database name may have (use fewer '_' or a"
        " shorter name)."]


@pytest.mark.parametrize("option", OPTIONS)
def test_a_database_that_reads_as_an_option_is_refused(option: str) -> None:
    assert problems(database=option) == [f"spec.database: '{option}' {DATABASE_SHAPE}"]


@pytest.mark.parametrize("database", ["app", "db-name", "$otus-db", "_x", "9", "a-", "A$b_c-1", "d" * 64])
def test_the_names_a_server_takes_are_accepted(database: str) -> None:
    assert problems(database=database) == []


def test_every_problem_is_reported_at_once_in_the_order_of_the_spec() -> None:
    fields = [p.split(":")[0] for p in problems(
        "X", ref_set=True, storage_size="big", database="a b", schedule="x y", keep=0, restore_from="-x")]
    assert fields == ["metadata.name", "spec.password / spec.passwordSecretRef", "spec.storage_size",
                      "spec.database", "spec.backup.schedule", "spec.backup.keep", "spec.restore_from"]


def test_the_anchors_are_ansibles_regex_search() -> None:
    # `$` matches before a final newline, as in the `regex` test the role used in Jinja
    assert problems(storage_size="1Gi\n", database="app\n") == []


def test_an_instance_keeps_only_what_the_roles_use() -> None:
    found = {"metadata": {"name": "db", "uid": "u-1", "annotations": {"kopf": "spec copy"}},
             "spec": {"database": "app", "image": "mysql:8", "password": "secret", "backup": {"keep": 2}},
             "status": {"conditions": [{"type": "Ready", "status": "True"}], "restore": {}}}
    assert spec.instance_parts(found) == {
        "metadata": {"name": "db", "uid": "u-1"},
        "spec": {"database": "app", "image": "mysql:8", "backup": {"keep": 2}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    bare = {"metadata": {"name": "db", "uid": "u-1"}, "spec": {"database": "app", "image": "i", "backup": None}}
    assert spec.instance_parts(bare) == {"metadata": {"name": "db", "uid": "u-1"},
                                         "spec": {"database": "app", "image": "i", "backup": {}},
                                         "status": {"conditions": []}}
    assert spec.instance_parts({}) == {}


def test_a_database_the_server_or_the_operator_keeps_is_refused() -> None:
    reserved = ["mysql", "sys", "mysql_operator"]
    assert problems(database="mysql_operator", reserved_databases=reserved) == [
        "spec.database: 'mysql_operator' is kept by the server or the operator (not one of:"
        " mysql, sys, mysql_operator)."]
    assert problems(database="Mysql", reserved_databases=reserved) == []  # another name on Linux


# --- the strings the roles hand to Jobs ---------------------------------------------------

@pytest.mark.parametrize(("kind", "good"), [
    ("database", "db-name"), ("image", "registry.local:5000/mysql:8.4"), ("file", "db-20260101T000000Z.sql"),
    ("job", "db-bk-29000000"), ("secret", "s3-creds"), ("endpoint", "https://s3.eu-west-1.amazonaws.com"),
    ("bucket", "backups"), ("prefix", "team/db"), ("region", "eu-west-1"), ("lineage", "team/db"),
])
def test_no_string_a_job_gets_starts_with_a_dash(kind: str, good: str) -> None:
    assert spec.value_problems([["spec.x", kind, good]]) == []
    for bad in [*OPTIONS, "-" + good]:
        found = spec.value_problems([["spec.x", kind, bad]])
        assert len(found) == 1 and found[0].startswith(f"spec.x: '{bad}' must be "), (kind, bad, found)


def test_a_value_problem_names_its_field_and_what_it_must_be() -> None:
    assert spec.value_problems([["spec.database", "database", "-hevil"], ["spec.image", "image", "mysql:8.4"],
                                ["spec.file", "file", "--x.sql"]]) == [
        f"spec.database: '-hevil' {DATABASE_SHAPE}",
        "spec.file: '--x.sql' must be a backup file's name: letters, digits, '_', '.' and '-', ending in .sql,"
        " starting with a letter, a digit or '_'."]
    assert spec.value_problems([]) == []


TARGET = {"endpoint": "http://s3:8333", "bucket": "b-1", "prefix": "team/db", "region": "us-east-1",
          "credentials_secret": "s3-creds", "insecure": False, "encryption_secret": "", "url": "s3://b-1/team/db",
          "archive_seconds": 0, "instance": "team/db"}


def test_a_bucket_target_is_checked_field_by_field() -> None:
    assert spec.target_problems({}, "spec.backup") == []
    assert spec.target_problems(TARGET, "spec.backup") == []
    bad = {**TARGET, "prefix": "team/-db", "region": "-x", "endpoint": "http://-h", "encryption_secret": "-k"}
    assert [p.split(":")[0] for p in spec.target_problems(bad, "spec.backup")] == [
        "spec.backup.s3.endpoint", "spec.backup.s3.prefix", "spec.backup.s3.region", "spec.backup.encryptionSecret"]
    # a segment of the prefix that is '.' or '..' is no name either
    assert spec.target_problems({**TARGET, "prefix": "team/../other"}, "spec.backup") != []


def test_a_recorded_target_names_the_annotations_keys() -> None:
    where = "metadata.annotations['otus.homework/backup-target']"
    assert spec.target_problems(TARGET, where, recorded=True) == []
    found = spec.target_problems({**TARGET, "bucket": "-b", "instance": "-x/y"}, where, recorded=True)
    assert [p.split(": '")[0] for p in found] == [f"{where}.bucket", f"{where}.instance"]
    # a record's annotation without a key of the target (its lineage) is not refused for it
    assert spec.target_problems({k: v for k, v in TARGET.items() if k != "instance"}, where, recorded=True) == []
    assert spec.target_problems(["not", "a", "mapping"], where, recorded=True) == [
        f"{where}: must be the settings of a bucket (a JSON object)."]


RECORD = {"name": "bk-1", "file": "bk-1.sql", "dump_job": "bk-1-dump", "verify_job": "bk-1-verify",
          "database": "app", "image": "mysql:8.4", "target": {}}


def backup(record: dict[str, Any] | None = None, **given: Any) -> list[str]:
    return list(spec.backup_problems(
        {**RECORD, **(record or {})}, **{"file": "", "job": "", "image": "", "database": "", **given},
        target_field="spec.instance: MySQL 'db' spec.backup", recorded=False))


def test_a_good_backup_has_no_problem() -> None:
    assert backup() == []
    assert backup({"file": "db-20260101T000000Z.sql", "dump_job": "db-bk-1", "database": "otus"},
                  file="db-20260101T000000Z.sql", job="db-bk-1", image="mysql:8.4", database="otus") == []


def test_a_backup_names_job_image_or_database_only_with_its_file() -> None:
    # the CRD's CEL rule: without a file the role takes the backup itself, with the instance's
    # root password, in the image the spec would name
    for given in ({"image": "evil:1"}, {"job": "x"}, {"database": "app"}):
        assert backup(**given)[0].startswith("spec.job, spec.image and spec.database describe spec.file")


@pytest.mark.parametrize("option", OPTIONS)
def test_a_backup_whose_database_reads_as_an_option_is_refused(option: str) -> None:
    # given in the spec, or taken from the status or the instance: refused either way
    assert backup({"database": option}, file="x.sql", database=option) == [
        f"spec.database: '{option}' {DATABASE_SHAPE}"]
    assert backup({"database": option}) == [
        f"spec.database (from the status or the instance's spec): '{option}' {DATABASE_SHAPE}"]


def test_a_backups_image_and_bucket_are_checked() -> None:
    assert [p.split(":")[0] for p in backup({"image": "-x"}, file="x.sql", image="-x")] == ["spec.image"]
    found = backup({"target": {**TARGET, "prefix": "-p"}})
    assert found == ["spec.instance: MySQL 'db' spec.backup.s3.prefix: '-p' must be names of letters, digits,"
                     " '_', '.' and '-' separated by '/', each starting with a letter, a digit or '_'."]
