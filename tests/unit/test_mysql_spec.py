"""mysql_common's filter_plugins/mysql_spec.py: the problems of a MySQL object's input, in
the words users read, and the parts of an instance the backup and restore roles keep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import sources

SOURCE = Path(__file__).resolve().parents[2] / "roles/mysql_common/filter_plugins/mysql_spec.py"

spec = sources.load(SOURCE, "mysql_spec")

GOOD: dict[str, Any] = {
    "password_set": True, "ref_set": False, "storage_size": "1Gi", "database": "app",
    "schedule": "", "schedule_fires": False, "keep": None, "restore_from": "",
}


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
    ({"database": "a b"}, "spec.database: 'a b' must be 1 to 64 letters, digits, '_', '-' or '$'."),
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
