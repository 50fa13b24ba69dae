"""Filters that read a Kubernetes Job and its pods, for every role that waits for a Job of
its own: its state (`mysql_job_state`), the termination message of its latest pod
(`mysql_job_message`: the scripts' summary or, on an error, the last lines of their log),
the exit code of that pod (`mysql_job_exit_code`) and the figures a summary names
(`mysql_job_figures`). Used by mysql (its restore Job), mysql_backup (dump and
verification Jobs) and mysql_restore (its load Job). Python rather than Jinja: a pod's
termination record sits in one of two places, and the latest pod is the one to read.
"""

from __future__ import annotations

import re
from typing import Any

_FIGURE = re.compile(r"\b(size|tables|rows|stored)=([0-9]+)\b")
_OBJECT = re.compile(r"\bobject=(s3://\S+)")
# with binary logs archived: the snapshot's position, how far the archive reaches, its gap
_BINLOG = re.compile(r"\bposition=(\S+) archived=(\S+) gap=(\S+)")


def _conditions(job: Any) -> set[str]:
    if not isinstance(job, dict):
        return set()
    conditions = (job.get("status") or {}).get("conditions") or []
    return {str(c.get("type")) for c in conditions
            if isinstance(c, dict) and c.get("status") == "True"}


def job_state(job: Any) -> str:
    """'complete', 'failed' or 'running' (also for a Job not started yet); 'absent' for {}."""
    if not job:
        return "absent"
    conditions = _conditions(job)
    if "Complete" in conditions:
        return "complete"
    if "Failed" in conditions:
        return "failed"
    return "running"


def _terminated(pod: Any) -> dict[str, Any]:
    """The termination record that speaks for a pod: the first of its containers (init
    containers first: a backup pod's dump runs before its shipping container) that failed,
    else the last one that terminated."""
    if not isinstance(pod, dict):
        return {}
    status = pod.get("status") or {}
    ended = []
    containers = ((status.get("initContainerStatuses") or [])
                  + (status.get("containerStatuses") or []))
    for container in containers:
        state = ((container.get("state") or {}).get("terminated")
                 or (container.get("lastState") or {}).get("terminated"))
        if state:
            ended.append(dict(state))
    failed = [state for state in ended if state.get("exitCode") not in (0, None)]
    return failed[0] if failed else (ended[-1] if ended else {})


def _latest_terminated(pods: Any) -> dict[str, Any]:
    finished = [pod for pod in pods or [] if _terminated(pod)]
    if not finished:
        return {}
    latest = max(finished,
                 key=lambda pod: str((pod.get("metadata") or {}).get("creationTimestamp") or ""))
    return _terminated(latest)


def termination_message(pods: Any) -> str:
    """The termination message of the most recent of a Job's pods that has terminated (its
    summary, or the last lines of its log on an error); for a container killed before it
    said anything, its reason and exit code."""
    terminated = _latest_terminated(pods)
    message = str(terminated.get("message") or "").strip()
    if message or not terminated:
        return message
    reason = terminated.get("reason") or "no reason"
    return f"the container ended with {reason} (exit code {terminated.get('exitCode')})"


def exit_code(pods: Any) -> int | None:
    """The exit code of the most recent of a Job's pods that has terminated, or None."""
    code = _latest_terminated(pods).get("exitCode")
    return int(code) if code is not None else None


def figures(message: Any) -> dict[str, Any]:
    """The figures (size, tables, rows; stored, the bytes in a bucket) a script's summary
    line names, the bucket object it names (object, an s3:// URL) and, for a server whose
    binary logs are archived, binlog: the snapshot's position (<log>:<position>), the time
    the archive reached then (archivedTo, RFC 3339) and the first log missing from it (gap)."""
    found: dict[str, Any] = {key: int(value) for key, value in _FIGURE.findall(str(message or ""))}
    url = _OBJECT.search(str(message or ""))
    if url:
        found["object"] = url.group(1)
    binlog = _BINLOG.search(str(message or ""))
    if binlog:
        position, archived, gap = binlog.groups()
        found["binlog"] = {"position": position, "archivedTo": "" if archived == "-" else archived,
                           "gap": "" if gap == "-" else gap}
    return found


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "mysql_job_state": job_state,
            "mysql_job_message": termination_message,
            "mysql_job_exit_code": exit_code,
            "mysql_job_figures": figures,
        }
