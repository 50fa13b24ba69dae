"""The mysql role's filters over backups and Jobs: retention's choice, the records' order,
when a cron schedule fires next, and what a Job's pods say."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests import sources

PLUGINS = Path(__file__).resolve().parents[2] / "roles/mysql/filter_plugins"


def _load(name: str) -> ModuleType:
    return sources.load(PLUGINS / f"{name}.py", name)


backups = _load("mysql_backups")
jobs = _load("mysql_jobs")


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
])
def test_when_a_cron_schedule_fires_next(schedule: str, after: str, expected: str) -> None:
    assert backups.cron_next(schedule, after) == expected


def pod(created: str, exit_code: int, message: str = "", reason: str = "Error") -> dict[str, Any]:
    terminated = {"exitCode": exit_code, "reason": reason, **({"message": message} if message else {})}
    return {"metadata": {"creationTimestamp": created},
            "status": {"containerStatuses": [{"state": {"terminated": terminated}}]}}


def test_a_jobs_latest_pod_speaks_for_it() -> None:
    pods = [pod("2026-01-01T00:00:02Z", 0, "file=x.sql size=10 tables=2 rows=7", "Completed"),
            pod("2026-01-01T00:00:01Z", 1, "first attempt failed")]
    assert jobs.termination_message(pods) == "file=x.sql size=10 tables=2 rows=7"
    assert jobs.exit_code(pods) == 0
    assert jobs.summary(jobs.termination_message(pods)) == {"size": 10, "tables": 2, "rows": 7}
    assert jobs.termination_message([pod("2026-01-01T00:00:00Z", 137, reason="Error")]) == \
        "the container ended with Error (exit code 137)"
    assert jobs.termination_message([]) == "" and jobs.exit_code([]) is None


@pytest.mark.parametrize(("conditions", "state"), [
    ([], "running"), ([{"type": "Complete", "status": "True"}], "complete"),
    ([{"type": "Failed", "status": "True"}], "failed"), ([{"type": "Failed", "status": "False"}], "running"),
])
def test_job_state(conditions: list[dict[str, str]], state: str) -> None:
    assert jobs.job_state({"status": {"conditions": conditions}}) == state
    assert jobs.job_state({}) == "absent"
