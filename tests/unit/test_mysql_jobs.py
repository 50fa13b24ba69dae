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
