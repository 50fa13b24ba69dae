"""mysql_common's filter_plugins/mysql_jobs.py: what a Job and its pods say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import sources

SOURCE = Path(__file__).resolve().parents[2] / "roles/mysql_common/filter_plugins/mysql_jobs.py"

jobs = sources.load(SOURCE, "mysql_jobs")


def pod(created: str, exit_code: int, message: str = "", reason: str = "Error") -> dict[str, Any]:
    terminated = {"exitCode": exit_code, "reason": reason, **({"message": message} if message else {})}
    return {"metadata": {"creationTimestamp": created},
            "status": {"containerStatuses": [{"state": {"terminated": terminated}}]}}


def test_a_jobs_latest_pod_speaks_for_it() -> None:
    pods = [pod("2026-01-01T00:00:02Z", 0, "file=x.sql size=10 tables=2 rows=7", "Completed"),
            pod("2026-01-01T00:00:01Z", 1, "first attempt failed")]
    assert jobs.termination_message(pods) == "file=x.sql size=10 tables=2 rows=7"
    assert jobs.exit_code(pods) == 0
    assert jobs.figures(jobs.termination_message(pods)) == {"size": 10, "tables": 2, "rows": 7}
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


def two_containers(init_exit: int, init_message: str, main: dict[str, Any] | None) -> dict[str, Any]:
    """A pod whose init container (a backup's dump) ran before its container (the shipping)."""
    init = {"state": {"terminated": {"exitCode": init_exit, "message": init_message}}}
    status: dict[str, Any] = {"initContainerStatuses": [init]}
    if main is not None:
        status["containerStatuses"] = [{"state": {"terminated": main}}]
    return {"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}, "status": status}


def test_a_failed_init_container_speaks_for_its_pod() -> None:
    failed_dump = two_containers(1, "backup of db failed: mysqldump failed", None)
    assert jobs.termination_message([failed_dump]) == "backup of db failed: mysqldump failed"
    assert jobs.exit_code([failed_dump]) == 1


def test_after_a_dump_the_shipping_container_speaks_for_its_pod() -> None:
    summary = "file=x.sql size=10 tables=2 rows=7 object=s3://b/ns/a/x.sql.zst.age stored=4"
    shipped = two_containers(0, "file=x.sql size=10 tables=2 rows=7", {"exitCode": 0, "message": summary})
    assert jobs.termination_message([shipped]) == summary
    assert jobs.figures(summary) == {"size": 10, "tables": 2, "rows": 7, "stored": 4,
                                     "object": "s3://b/ns/a/x.sql.zst.age"}
    refused = two_containers(0, "file=x.sql size=10", {"exitCode": 1, "message": "could not write s3://b/x"})
    assert jobs.termination_message([refused]) == "could not write s3://b/x"


def test_a_shipped_backup_of_a_server_with_archived_logs_names_its_position_and_the_archive() -> None:
    found = jobs.figures("file=a.sql size=10 tables=1 rows=2 object=s3://b/p/a.sql.zst stored=9"
                         " position=mysql-bin.000004:1234 archived=2026-11-27T16:04:05Z gap=-")
    assert found["binlog"] == {"position": "mysql-bin.000004:1234", "archivedTo": "2026-11-27T16:04:05Z", "gap": ""}
    assert "binlog" not in jobs.figures("file=a.sql size=10 tables=1 rows=2")
