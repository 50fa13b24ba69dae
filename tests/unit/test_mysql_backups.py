"""mysql_common's filter_plugins/mysql_backups.py: retention's choice, the records' order,
the backup part of an instance's status, a record's Verified condition and when a cron
schedule fires next."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import sources

SOURCE = Path(__file__).resolve().parents[2] / "roles/mysql_common/filter_plugins/mysql_backups.py"

backups = sources.load(SOURCE, "mysql_backups")


def record(name: str, finished: str, state: str = "Complete", verified: str = "True",
           reason: str = "FiguresMatch", pruning: bool = False) -> dict[str, Any]:
    conditions = [{"type": "Verified", "status": verified, "reason": reason}] if verified else []
    return {"metadata": {"name": name, "creationTimestamp": finished,
                         "labels": {"otus.homework/pruning": "true"} if pruning else {}},
            "spec": {"instance": "db"},
            "status": {"state": state, "file": f"{name}.sql", "database": "d",
                       "completionTime": finished, "conditions": conditions}}


def names(items: list[dict[str, Any]]) -> list[str]:
    return [item["name"] for item in items]


def test_records_newest_first_and_unsettled_ones_are_neither_good_nor_bad() -> None:
    ordered = backups.by_age([record("a", "2026-01-01T00:00:00Z"),
                              record("c", "2026-01-03T00:00:00Z", verified=""),  # verifying
                              record("b", "2026-01-02T00:00:00Z", verified="False")], "", "", {}, {})
    assert names(ordered) == ["c", "b", "a"]
    assert [(r["good"], r["running"]) for r in ordered] == [(False, True), (False, False), (True, False)]


def test_the_running_record_is_taken_as_this_run_sees_it() -> None:
    ordered = backups.by_age([record("new", "2026-01-03T00:00:00Z", state="", verified="")],
                             "new", "Complete", {"type": "Verified", "status": "True"},
                             {"completionTime": "2026-01-03T00:00:00Z"})
    assert ordered[0]["good"] and not ordered[0]["running"]


def test_verification_off_settles_a_complete_record_as_good() -> None:
    ordered = backups.by_age([record("a", "2026-01-01T00:00:00Z", verified="Unknown", reason="NotVerified")],
                             "", "", {}, {})
    assert ordered[0]["good"]


def test_retention_keeps_the_newest_good_ones_and_spares_what_is_in_use_or_running() -> None:
    ordered = backups.by_age([
        record("g1", "2026-01-01T00:00:00Z"), record("g2", "2026-01-02T00:00:00Z"),
        record("g3", "2026-01-03T00:00:00Z"), record("g4", "2026-01-04T00:00:00Z"),
        record("bad1", "2026-01-01T12:00:00Z", state="Failed", verified=""),
        record("bad2", "2026-01-02T12:00:00Z", state="Failed", verified=""),
        record("bad3", "2026-01-03T12:00:00Z", state="Failed", verified=""),
        record("busy", "2026-01-05T00:00:00Z", verified=""),
    ], "", "", {}, {})
    assert names(backups.excess(ordered, 2, [])) == ["g2", "g1", "bad1"]
    assert names(backups.excess(ordered, 2, ["g1.sql"])) == ["g2", "bad1"]  # a restore loads it
    assert names(backups.excess(ordered, 2, ["g2"])) == ["g1", "bad1"]  # a MySQLRestore names it


def test_retention_finishes_an_interrupted_prune_but_never_takes_the_newest_good_one() -> None:
    ordered = backups.by_age([record("g1", "2026-01-01T00:00:00Z", pruning=True),
                              record("g2", "2026-01-02T00:00:00Z", pruning=True)], "", "", {}, {})
    assert names(backups.excess(ordered, 5, [])) == ["g1"]


def test_the_latest_marker_never_moves_back_past_a_newer_running_record() -> None:
    older, newer = record("older", "2026-01-01T00:00:00Z"), record("newer", "2026-01-02T00:00:00Z")
    running = record("newer", "2026-01-02T00:00:00Z", state="", verified="")
    # the finalizer named the backup taken at deletion the latest; its record is not settled
    view = backups.by_age([older, running], "older", "Complete", {"type": "Verified", "status": "True"}, {})
    assert [r["good"] for r in view] == [False, True]
    assert backups.latest(view, "newer.sql") == {}
    assert backups.latest(view, "")["file"] == "older.sql"  # no marker yet
    # settled, its own run names it; nothing else moves the marker back
    settled = backups.by_age([older, newer], "", "", {}, {})
    assert backups.latest(settled, "older.sql")["file"] == "newer.sql"
    assert backups.latest(settled, "newer.sql")["file"] == "newer.sql"
    # bad after all (verification failed): the older good one becomes the latest again
    bad = record("newer", "2026-01-02T00:00:00Z", verified="False")
    assert backups.latest(backups.by_age([older, bad], "", "", {}, {}), "newer.sql")["file"] == "older.sql"
    # a running record older than the newest good one does not hold the marker
    stale = record("stale", "2025-12-31T00:00:00Z", state="", verified="")
    assert backups.latest(backups.by_age([older, stale], "", "", {}, {}), "stale.sql")["file"] == "older.sql"
    assert backups.latest(backups.by_age([running], "", "", {}, {}), "") == {}  # nothing good yet


@pytest.mark.parametrize(("schedule", "after", "expected"), [
    ("* * * * *", "2026-11-24T15:30:20Z", "2026-11-24T15:31:00Z"),
    ("0 3 * * *", "2026-11-24T15:30:00Z", "2026-11-25T03:00:00Z"),
    ("*/15 9-17 * * mon-fri", "2026-11-28T15:30:00Z", "2026-11-30T09:00:00Z"),  # Saturday
    ("0 0 1,15 * *", "2026-11-24T00:00:00Z", "2026-12-01T00:00:00Z"),
    ("0 0 13 * fri", "2026-11-24T00:00:00Z", "2026-11-27T00:00:00Z"),  # day OR weekday
    ("@weekly", "2026-11-24T15:30:20Z", "2026-11-29T00:00:00Z"),
    ("0 0 * jan *", "2026-11-24T00:00:00Z", "2027-01-01T00:00:00Z"),
    ("61 * * * *", "2026-11-24T00:00:00Z", ""),
    ("not a schedule", "2026-11-24T00:00:00Z", ""),
    ("0 0 30 2 *", "2026-11-24T00:00:00Z", ""),  # never fires
    ("0 0 * * * 5", "2026-11-24T00:00:00Z", ""),  # croniter's seconds field: not a CronJob's
    ("0 0 ? * 7", "2026-11-24T00:00:00Z", "2026-11-29T00:00:00Z"),  # 7 is Sunday too
])
def test_when_a_cron_schedule_fires_next(schedule: str, after: str, expected: str) -> None:
    assert backups.cron_next(schedule, after) == expected


def test_the_status_counts_the_good_backups_and_names_the_newest_good_and_bad_ones() -> None:
    records = [record("g1", "2026-01-01T00:00:00Z"), record("g2", "2026-01-02T00:00:00Z"),
               record("f1", "2026-01-03T00:00:00Z", state="Failed", verified=""),
               record("v1", "2026-01-04T00:00:00Z", verified="False", reason="FiguresDiffer"),
               record("r1", "2026-01-05T00:00:00Z", verified="")]  # still being verified
    assert backups.backup_status(records, claim="db-backup", schedule="@yearly",
                                 now="2026-11-24T15:30:00Z") == {
        "claim": "db-backup", "count": 2,
        "lastSuccessful": "g2", "lastSuccessfulTime": "2026-01-02T00:00:00Z",
        "lastFailed": "v1", "lastFailedTime": "2026-01-04T00:00:00Z",
        "schedule": "@yearly", "nextScheduled": "2027-01-01T00:00:00Z",
    }


def test_the_status_leaves_out_what_has_no_value() -> None:
    assert backups.backup_status([], claim="db-backup", schedule="", now="2026-11-24T15:30:00Z") == {
        "claim": "db-backup", "count": 0}
    # a schedule that never fires has no next time
    assert backups.backup_status([], claim="c", schedule="bogus", now="2026-11-24T15:30:00Z") == {
        "claim": "c", "count": 0, "schedule": "bogus"}


def verified(verdict: dict[str, Any] | None = None, previous: list[dict[str, Any]] | None = None,
             verify: Any = True) -> dict[str, Any]:
    return dict(backups.verified_condition(verdict or {}, verify_now=verdict is not None,
                                           previous_conditions=previous or [], verify=verify))


def test_the_verified_condition_is_this_runs_verdict_when_it_verified() -> None:
    assert verified({"job_state": "complete", "message": "2 tables match"}) == {
        "type": "Verified", "status": "True", "reason": "FiguresMatch", "message": "2 tables match"}
    assert verified({"job_state": "failed", "message": "table t differs"}) == {
        "type": "Verified", "status": "False", "reason": "FiguresDiffer", "message": "table t differs"}


def test_the_verified_condition_is_kept_or_unknown_with_its_reason() -> None:
    kept = {"type": "Verified", "status": "True", "reason": "FiguresMatch", "message": "m"}
    assert verified(previous=[{"type": "Other"}, kept]) == kept
    assert verified(previous=[{"type": "Verified", "status": "Unknown"}]) == {
        "type": "Verified", "status": "Unknown", "reason": "", "message": ""}
    off = verified(verify=False)
    assert (off["status"], off["reason"]) == ("Unknown", "NotVerified")
    assert off["reason"] in backups.UNVERIFIED_REASONS  # such a record is settled
    assert verified() == {"type": "Verified", "status": "Unknown", "reason": "NoCompleteDump",
                          "message": "the dump did not complete"}



def test_a_condition_written_while_a_job_ran_is_decided_again() -> None:
    """A run that ended while the dump or the verification Job ran wrote Verified Unknown with
    a pending reason: the next run decides anew (here: verification off), and until then the
    record is running, neither good nor bad."""
    for reason in backups.PENDING_REASONS:
        pending = [{"type": "Verified", "status": "Unknown", "reason": reason, "message": "m"}]
        assert verified(previous=pending, verify=False)["reason"] == "NotVerified"
        ordered = backups.by_age([record("a", "2026-01-01T00:00:00Z", verified="Unknown", reason=reason)],
                                 "", "", {}, {})
        assert (ordered[0]["good"], ordered[0]["running"]) == (False, True)


ARCHIVE = "s3://b/ns/db"


def test_the_archived_condition_names_a_gap_in_the_archive() -> None:
    status = {"pointInTime": {"from": "2026-11-27T10:00:00Z", "archivedTo": "2026-11-27T11:00:00Z",
                              "asOf": "db-now", "gap": "000003"}}
    [condition] = backups.archive_condition(status, url=ARCHIVE, archiving=True, previous_conditions=[])
    assert (condition["type"], condition["status"], condition["reason"]) == ("Archived", "False", "ArchiveGap")
    assert "s3://b/ns/db/binlogs lack 000003" in condition["message"]
    assert "db-now" in condition["message"]


def test_the_archived_condition_says_how_far_the_archive_reaches() -> None:
    status = {"pointInTime": {"from": "2026-11-27T10:00:00Z", "archivedTo": "2026-11-27T11:00:00Z",
                              "asOf": "db-now"}}
    [condition] = backups.archive_condition(status, url=ARCHIVE, archiving=True, previous_conditions=[])
    assert (condition["status"], condition["reason"]) == ("True", "Archiving")
    assert "reached 2026-11-27T11:00:00Z" in condition["message"]
    [before] = backups.archive_condition({"count": 0}, url=ARCHIVE, archiving=True, previous_conditions=[])
    assert (before["status"], before["reason"]) == ("Unknown", "NoPositionYet")


def test_without_archiving_the_condition_is_left_out_or_turned_off() -> None:
    assert backups.archive_condition({}, url="", archiving=False, previous_conditions=[]) == []
    had = [{"type": "Ready", "status": "True"}, {"type": "Archived", "status": "True"}]
    [off] = backups.archive_condition({}, url="", archiving=False, previous_conditions=had)
    assert (off["status"], off["reason"]) == ("False", "Off")


def test_latest_is_not_loaded_into_another_database() -> None:
    """An instance re-created with another spec.database: the backup claim's latest backup
    holds the old one, and a dump names no database (it would load under the new name)."""
    annotation, claim = "otus.homework/latest-backup", "db-backup"
    assert backups.latest_backup_problem("otus-1.sql", "otus", "shop", claim, annotation) == (
        "latest is backup 'otus-1.sql' (otus.homework/latest-backup of the backup volume claim db-backup), which "
        "holds database 'otus', not spec.database 'shop': set spec.database to 'otus' to restore it, or "
        "spec.restore_from to none to start empty")
    # the same database; a claim from before the database was recorded; no latest backup
    assert backups.latest_backup_problem("otus-1.sql", "otus", "otus", claim, annotation) == ""
    assert backups.latest_backup_problem("otus-1.sql", "", "shop", claim, annotation) == ""
    assert backups.latest_backup_problem("", "otus", "shop", claim, annotation) == ""


KEYS = {"job": "otus.homework/job", "backup_file": "otus.homework/backup-file",
        "backup_target": "otus.homework/backup-target"}
INSTANCE_SPEC = {"database": "shop", "image": "mysql:8.4"}
TARGET = {"bucket": "ours", "url": "s3://ours/ns/db"}


def job(name: str, *, cronjob: str = "", file: str = "", instance: str = "db",
        database: str = "shop", image: str = "mysql:8.4") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/instance": instance}}
    if cronjob:  # (a Job whose CronJob is gone has no owner reference)
        metadata["labels"]["otus.homework/job"] = "scheduled-backup"
    else:
        metadata["labels"]["otus.homework/job"] = "backup"
        metadata["annotations"] = {"otus.homework/backup-file": file}
    container = {"name": "backup", "image": image, "env": [{"name": "MYSQL_DATABASE", "value": database}]}
    return {"metadata": metadata, "spec": {"template": {"spec": {"containers": [container]}}}}


def facts(obj: dict[str, Any], proof: dict[str, Any] | None = None) -> dict[str, Any]:
    return backups.facts(obj, job=proof or {}, instance_spec=INSTANCE_SPEC, instance_target=TARGET,
                         cronjob="db-bk", keys=KEYS)


def tenant_record(name: str = "r", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"instance": "db", **spec}}


def test_a_backup_taken_now_takes_the_instances_database_image_and_bucket() -> None:
    found = facts(tenant_record("now"))
    assert found == {"origin": "on-demand", "file": "now.sql", "job": "now-dump", "database": "shop",
                     "image": "mysql:8.4", "target": TARGET, "attested": False, "problem": ""}


def test_what_the_status_states_stands_whatever_the_spec_says() -> None:
    obj = tenant_record("bk", file="other.sql", image="evil:1", database="other")
    obj["status"] = {"file": "bk.sql", "origin": "operator", "job": "db-backup", "database": "shop",
                     "image": "mysql:8.0", "target": {"bucket": "kept"}}
    found = facts(obj)
    assert (found["file"], found["image"], found["database"], found["target"], found["attested"]) == (
        "bk.sql", "mysql:8.0", "shop", {"bucket": "kept"}, True)


def test_a_status_from_before_the_target_was_kept_takes_the_instances_bucket() -> None:
    obj = tenant_record("bk")
    obj["status"] = {"file": "bk.sql", "origin": "on-demand", "database": "shop", "image": "mysql:8.4"}
    assert facts(obj)["target"] == TARGET


@pytest.mark.parametrize("spec", [
    {"file": "db-20261128t120000z.sql"},  # no Job named
    {"file": "db-bk-1.sql", "job": "db-bk-1"},  # the Job does not exist
])
def test_a_file_no_job_of_the_operator_wrote_is_refused_naming_spec_file(spec: dict[str, Any]) -> None:
    found = facts(tenant_record(**spec))
    assert found["problem"].startswith(f"spec.file: '{spec['file']}' is not a backup the operator took")
    assert (found["file"], found["image"], found["target"]) == ("", "", {})


def test_a_scheduled_jobs_file_is_the_operators_with_the_jobs_database_and_image() -> None:
    obj = tenant_record("db-bk-29001", file="db-bk-29001.sql", job="db-bk-29001",
                        database="other", image="evil:1")
    found = facts(obj, job("db-bk-29001", cronjob="db-bk", database="shop", image="mysql:8.0"))
    assert found == {"origin": "schedule", "file": "db-bk-29001.sql", "job": "db-bk-29001",
                     "database": "shop", "image": "mysql:8.0", "target": TARGET, "attested": False,
                     "problem": ""}


def test_a_deletions_file_is_the_operators_when_its_job_names_it() -> None:
    found = facts(tenant_record("db-x", file="db-x.sql", job="db-backup"), job("db-backup", file="db-x.sql"))
    assert (found["origin"], found["file"], found["problem"]) == ("operator", "db-x.sql", "")


@pytest.mark.parametrize(("spec", "proof"), [
    # a real backup's file named by a record of the tenant's, with the deletion Job
    ({"file": "db-older.sql", "job": "db-backup"}, job("db-backup", file="db-x.sql")),
    # another CronJob's Job (another instance's), or its file under another name
    ({"file": "other-bk-1.sql", "job": "other-bk-1"}, job("other-bk-1", cronjob="other-bk", instance="other")),
    ({"file": "db-bk-2.sql", "job": "db-bk-1"}, job("db-bk-1", cronjob="db-bk")),
    # a scheduled Job of another instance whose name starts like this one's CronJob's
    ({"file": "db-bk-x-1.sql", "job": "db-bk-x-1"}, job("db-bk-x-1", cronjob="db-bk-x")),
    # a Job of the instance that is neither
    ({"file": "x.sql", "job": "db-rotate"}, {"metadata": {"name": "db-rotate",
                                                          "labels": {"app.kubernetes.io/instance": "db"}}}),
])
def test_a_job_that_does_not_prove_the_file_refuses_it(spec: dict[str, Any], proof: dict[str, Any]) -> None:
    assert facts(tenant_record(**spec), proof)["problem"].startswith("spec.file:")


def test_a_bucket_in_an_annotation_is_refused_unless_the_status_states_the_backup() -> None:
    obj = tenant_record("now")
    obj["metadata"]["annotations"] = {"otus.homework/backup-target": '{"bucket": "theirs"}'}
    found = facts(obj)
    assert found["problem"].startswith("metadata.annotations['otus.homework/backup-target']")
    assert found["target"] == {}
    obj["status"] = {"file": "now.sql", "origin": "on-demand", "target": TARGET}
    assert facts(obj)["target"] == TARGET and facts(obj)["problem"] == ""


def test_retention_and_the_latest_see_only_what_the_operator_states() -> None:
    real = record("real", "2026-01-01T00:00:00Z")
    forged = tenant_record("forged", file="real.sql")
    forged["status"] = {"state": "Complete", "conditions": [{"type": "Verified", "status": "False"}]}
    ordered = backups.by_age([real, forged], "", "", {}, {})
    assert names(ordered) == ["real"]
    assert backups.excess(ordered, 1, []) == []


def test_the_running_record_counts_with_this_runs_facts() -> None:
    running = tenant_record("now")
    ordered = backups.by_age([running, record("old", "2026-01-01T00:00:00Z")], "now", "Complete",
                             {"type": "Verified", "status": "True"}, {"completionTime": "2026-01-02T00:00:00Z"},
                             this_facts={"origin": "on-demand", "file": "now.sql", "database": "shop",
                                         "job": "now-dump"})
    assert [(r["name"], r["file"], r["job"]) for r in ordered] == [("now", "now.sql", ""), ("old", "old.sql", "")]
