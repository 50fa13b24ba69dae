"""Filters over an instance's backups (MySQLBackup records), for the mysql role (its status
and schedule) and the mysql_backup role (verification, retention): the records newest first
as retention sees them (`mysql_backup_by_age`), the one to name the latest
(`mysql_backup_latest`), whether a new data volume may load it into spec.database
(`mysql_latest_backup_problem`), those retention removes (`mysql_backup_excess`), the backup part of
an instance's status (`mysql_backup_status`), the instance's Archived condition from it
(`mysql_archive_condition`), a record's Verified condition
(`mysql_backup_verified_condition`), when a cron schedule fires next (`mysql_cron_next`) and
what a record's backup is, from where only the operator writes (`mysql_backup_facts`).

One file, because they share what makes a record good, bad or still running (`_settled`,
the Verified reasons); unit tests: tests/unit/test_mysql_backups.py.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

import croniter

_CRON_FIELDS = 5  # minute, hour, day of the month, month, day of the week
# Reasons of a Verified condition that is Unknown for good: verification is off, or there is
# no complete dump to verify (`verified_condition`); such a record is settled.
NOT_VERIFIED, NO_COMPLETE_DUMP = "NotVerified", "NoCompleteDump"
UNVERIFIED_REASONS = (NOT_VERIFIED, NO_COMPLETE_DUMP)
# Reasons of a Verified condition that is Unknown for now: the record's run ended while the
# dump Job or the verification Job it follows still ran (the mysql_backup role's
# tasks/pending.yml); the record is not settled, and its next run decides again.
PENDING_REASONS = ("DumpRunning", "Verifying")

def _verified(record: dict[str, Any]) -> dict[str, Any]:
    for condition in (record.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Verified":
            return condition
    return {}


def _settled(state: str, verified: Any) -> bool:
    """Whether a record is done: Failed, or Complete with its verification decided (True,
    False, or Unknown because it is off or the dump never completed)."""
    verified = verified or {}
    return state == "Failed" or (state == "Complete" and (
        verified.get("status") in ("True", "False")
        or verified.get("reason") in UNVERIFIED_REASONS))


_REFUSED = {"origin": "refused", "file": "", "job": "", "database": "", "image": "", "target": {},
            "attested": False}


def facts(record: Any, *, job: Any, instance_spec: Any, instance_target: Any, cronjob: str,
          keys: Any) -> dict[str, Any]:
    """What a MySQLBackup ``record``'s backup is: {origin, file, job, database, image, target,
    attested, problem}, from where only the operator writes. A tenant may write a record's
    spec and annotations but not its status (the status subresource) nor Jobs, so:

    - a status that names a file was written by the operator: its facts stand (a status
      from before the target was kept in it takes the instance's bucket);
    - a spec.file is the operator's only when ``job`` (the Job spec.job names, read by the
      role; {} when there is none) proves it: the backup CronJob's Job (``cronjob``) that
      writes <Job name>.sql (labelled keys.job=scheduled-backup, named <cronjob>-<minutes>),
      or the Job of a backup at deletion whose annotation
      (keys.backup_file) names spec.file; both of spec.instance. The database and the image
      are that Job's, the bucket the instance's. Anything else is refused (``problem``), as is
      a bucket named in the record's annotation (keys.backup_target), which only the status
      states;
    - without a file it is a backup to take now: <name>.sql by Job <name>-dump, of the
      instance's database, in its image, to its bucket.
    spec.database, spec.image and the annotation are never read as facts."""
    record = record if isinstance(record, dict) else {}
    metadata, spec = record.get("metadata") or {}, record.get("spec") or {}
    status = record.get("status") or {}
    keys = keys if isinstance(keys, dict) else {}
    instance_spec = instance_spec if isinstance(instance_spec, dict) else {}
    target = instance_target if isinstance(instance_target, dict) else {}
    name, instance = str(metadata.get("name") or ""), str(spec.get("instance") or "")
    if status.get("file"):
        kept = status.get("target")
        origin = status.get("origin") or ("schedule" if status.get("job") else "on-demand")
        return {"origin": str(origin), "file": str(status["file"]),
                "job": str(status.get("job") or f"{name}-dump"),
                "database": str(status.get("database") or instance_spec.get("database") or ""),
                "image": str(status.get("image") or instance_spec.get("image") or ""),
                "target": kept if isinstance(kept, dict) else target,
                "attested": True, "problem": ""}
    annotation = keys.get("backup_target", "")
    if annotation in (metadata.get("annotations") or {}):
        return {**_REFUSED,
                "problem": (f"metadata.annotations['{annotation}']: the bucket a backup goes to is"
                            " the instance's spec.backup.s3, which only the operator records; a"
                            " MySQLBackup does not choose it. Remove the annotation.")}
    file = str(spec.get("file") or "")
    if not file:
        return {"origin": "on-demand", "file": f"{name}.sql", "job": f"{name}-dump",
                "database": str(instance_spec.get("database") or ""),
                "image": str(instance_spec.get("image") or ""), "target": target,
                "attested": False, "problem": ""}
    job = job if isinstance(job, dict) else {}
    job_meta = job.get("metadata") or {}
    job_name = str(job_meta.get("name") or "")
    labels, annotations = job_meta.get("labels") or {}, job_meta.get("annotations") or {}
    # (not by its owner reference: a Job outlives its CronJob when the schedule is removed)
    scheduled = (labels.get(keys.get("job", "")) == "scheduled-backup"
                 and re.fullmatch(rf"{re.escape(cronjob)}-[0-9]+", job_name) is not None
                 and file == f"{job_name}.sql")
    at_deletion = (labels.get(keys.get("job", "")) == "backup"
                   and annotations.get(keys.get("backup_file", "")) == file)
    ours = bool(job_name) and job_name == spec.get("job") and (
        labels.get("app.kubernetes.io/instance") == instance and (scheduled or at_deletion))
    if not ours:
        return {**_REFUSED,
                "problem": (f"spec.file: '{file}' is not a backup the operator took: a record"
                            " with a file is the operator's record of a scheduled Job's or a"
                            " deletion's"
                            f" backup, and spec.job must name that Job of MySQL '{instance}'"
                            f" ({'it names none' if not spec.get('job') else 'it does not'})."
                            " To take a backup now, name spec.instance alone.")}
    containers = ((((job.get("spec") or {}).get("template") or {}).get("spec") or {})
                  .get("containers") or [])
    dumper = next((c for c in containers if isinstance(c, dict) and c.get("name") == "backup"),
                  {})
    env = {e.get("name"): e.get("value") for e in dumper.get("env") or []
           if isinstance(e, dict)}
    return {"origin": "schedule" if scheduled else "operator", "file": file, "job": job_name,
            "database": str(env.get("MYSQL_DATABASE") or ""),
            "image": str(dumper.get("image") or ""),
            "target": target, "attested": False, "problem": ""}


def by_age(records: Any, name: str, state: str, verified: Any, dump: Any, *,
           this_facts: Any = None) -> list[dict[str, Any]]:
    """The instance's backup records, newest first, as {name, file, database, job, good,
    running, pruning, completionTime} (job: the scheduled Job it records, or ""). Running:
    not settled (its dump or its verification is under way): neither good nor bad, never
    pruned. The record of the running reconciliation (``name``) is taken with this run's
    ``state``, Verified condition, dump outcome and facts (``this_facts``, mysql_backup_facts):
    its status is not written yet. Another record counts only once its status names its file:
    what the operator states (a record a tenant wrote is neither kept, chosen nor pruned)."""
    result = []
    for record in records or []:
        metadata = record.get("metadata") or {}
        status = record.get("status") or {}
        record_name = str(metadata.get("name"))
        this = record_name == name
        if this and isinstance(this_facts, dict):
            scheduled = this_facts.get("origin") == "schedule"
            status = {**status, "file": this_facts.get("file"),
                      "database": this_facts.get("database"),
                      "job": this_facts.get("job") if scheduled else "",
                      "origin": this_facts.get("origin")}
        if not status.get("file"):
            continue
        record_state = state if this else str(status.get("state") or "")
        record_verified = (verified or {}) if this else _verified(record)
        settled = _settled(record_state, record_verified)
        finished = (((dump or {}).get("completionTime") if this else None)
                    or status.get("completionTime"))
        result.append({
            "name": record_name,
            "file": str(status["file"]),
            "database": str(status.get("database") or ""),
            "job": str(status.get("job") or "") if status.get("origin") == "schedule" else "",
            "good": (settled and record_state == "Complete"
                     and record_verified.get("status") != "False"),
            "running": not settled,
            "pruning": (metadata.get("labels") or {}).get("otus.homework/pruning") == "true",
            "completionTime": str(finished or metadata.get("creationTimestamp") or ""),
            "binlog": status.get("binlog") if isinstance(status.get("binlog"), dict) else {},
        })
    return sorted(result, key=lambda r: (r["completionTime"], r["name"]), reverse=True)


def latest(records: Any, current: str) -> dict[str, Any]:
    """The record to name the latest backup, from ``records`` (mysql_backup_by_age, newest
    first) and the file the marker names now: the newest good one, unless the marker names
    a record that is still running and newer than it. The finalizer names the backup taken
    at deletion the latest as soon as its dump completed, before that record's own run
    settled it; the run of an older record, reading it as running, must not move the marker
    back (a re-created instance would restore the older backup). Once the newer record is
    settled its own run moves the marker: to itself, or back if it is bad. ``{}``: leave
    the marker as it is."""
    records = list(records or [])
    good = [r for r in records if r["good"]]
    if not good:
        return {}
    marked = next((r for r in records if r["file"] == current), None)
    if marked is not None and marked["running"] and records.index(marked) < records.index(good[0]):
        return {}
    return dict(good[0])


def excess(records: Any, keep: int, in_use: Any) -> list[dict[str, Any]]:
    """What retention removes from ``records`` (mysql_backup_by_age, newest first): good
    backups beyond the newest ``keep``, bad ones (failed, or failed verification) beyond as
    many, and those already marked for pruning; never the newest good one, nor one whose
    file or name is in ``in_use`` (a restore loads it)."""
    records = list(records or [])
    good = [r for r in records if r["good"]]
    bad = [r for r in records if not r["good"] and not r["running"]]
    chosen = good[keep:] + bad[keep:] + [r for r in records if r["pruning"] and not r["running"]]
    newest = good[0]["name"] if good else None
    result: list[dict[str, Any]] = []
    for record in chosen:
        busy = record["file"] in (in_use or []) or record["name"] in (in_use or [])
        if (record["name"] != newest and not busy
                and record["name"] not in {r["name"] for r in result}):
            result.append(record)
    return result


def backup_status(records: Any, *, claim: str, schedule: Any, now: Any) -> dict[str, Any]:
    """The `backup` part of a MySQL object's status, from its MySQLBackup ``records`` as the
    API server returns them: its backup claim, how many good backups it has, the newest good
    one and the newest bad one (with their times), its ``schedule`` and when that fires next
    after ``now``. Keys without a value are left out (the API server drops nulls: a null
    would differ at each run)."""
    ordered = by_age(records, "", "", {}, {})
    good = [r for r in ordered if r["good"]]
    failed = next((r for r in ordered if not r["good"] and not r["running"]), {})
    status = {
        "claim": claim,
        "count": len(good),
        "lastSuccessful": good[0]["name"] if good else None,
        "lastSuccessfulTime": good[0]["completionTime"] if good else None,
        "lastFailed": failed.get("name"),
        "lastFailedTime": failed.get("completionTime"),
        "schedule": schedule or None,
        "nextScheduled": (cron_next(schedule, now) or None) if schedule else None,
        "pointInTime": _point_in_time(good),
    }
    return {key: value for key, value in status.items() if value is not None}


def _point_in_time(good: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the newest good backups say of the binary-log archive: the earliest time a
    restore can reach (the oldest such backup's completion), how far the archive reached at
    the newest one's run, and a gap it found; None without archived binary logs."""
    with_logs = [r for r in good if r["binlog"].get("position")]
    if not with_logs:
        return None
    newest, oldest = with_logs[0], with_logs[-1]
    found = {"from": oldest["completionTime"],
             "archivedTo": newest["binlog"].get("archivedTo") or None,
             "asOf": newest["name"], "gap": newest["binlog"].get("gap") or None}
    return {key: value for key, value in found.items() if value is not None}


def archive_condition(backup: Any, *, url: Any, archiving: Any,
                      previous_conditions: Any) -> list[dict[str, Any]]:
    """The instance's Archived condition (a list of one, or none), from the ``backup`` part
    of its status (`backup_status`): False with reason ArchiveGap when the newest backup with
    a position found a log missing from the archive in ``url`` (a restore whose replay needs
    it is refused), True while the archive reaches a time, Unknown before the first backup
    with a position. Without ``archiving`` (spec.backup.pointInTime off): False with reason
    Off when the status has the condition from before, else none."""
    if not archiving:
        had = any(c.get("type") == "Archived"
                  for c in previous_conditions or [] if isinstance(c, dict))
        if not had:
            return []
        return [_condition("False", "Off",
                           "binary logs are not archived (spec.backup.pointInTime)")]
    found = (backup or {}).get("pointInTime") or {}
    where = f"{url}/binlogs"
    if found.get("gap"):
        return [_condition("False", "ArchiveGap", (
            f"the binary logs archived in {where} lack {found['gap']} (found by backup"
            f" {found.get('asOf', '')}): a point-in-time restore whose replay needs it is"
            " refused; restores to times after a newer backup are not affected"))]
    if not found.get("archivedTo"):
        return [_condition("Unknown", "NoPositionYet", (
            f"binary logs are archived to {where}; a point-in-time restore needs a backup"
            " taken since (its position in the logs)"))]
    return [_condition("True", "Archiving", (
        f"binary logs are archived to {where}; they reached {found['archivedTo']} at backup"
        f" {found.get('asOf', '')}, the earliest time to restore to is {found.get('from', '')}"))]


def _condition(status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": "Archived", "status": status, "reason": reason, "message": message}


def verified_condition(verdict: Any, *, verify_now: Any, previous_conditions: Any,
                       verify: Any) -> dict[str, Any]:
    """A record's Verified condition: from this run's ``verdict`` ({job_state, message} of
    the verification Job) when it verified now; else the one its status has; else Unknown,
    because verification is off (``verify`` false) or the dump did not complete."""
    if verify_now:
        good = verdict.get("job_state", "") == "complete"
        return {"type": "Verified", "status": "True" if good else "False",
                "reason": "FiguresMatch" if good else "FiguresDiffer",
                "message": verdict["message"]}
    previous = next((c for c in previous_conditions or [] if c.get("type") == "Verified"
                     and c.get("reason") not in PENDING_REASONS), {})
    if previous:
        return {"type": previous["type"], "status": previous["status"],
                "reason": previous.get("reason", ""), "message": previous.get("message", "")}
    if not verify:
        return {"type": "Verified", "status": "Unknown", "reason": NOT_VERIFIED,
                "message": ("verification is off (spec.backup.verify of the instance, or"
                            " spec.verify)")}
    return {"type": "Verified", "status": "Unknown", "reason": NO_COMPLETE_DUMP,
            "message": "the dump did not complete"}


def cron_next(schedule: Any, after: Any) -> str:
    """The first time after ``after`` (ISO 8601, UTC) a five-field cron schedule (or a
    macro such as @daily) fires, as ISO 8601 UTC, by croniter (which, like the CronJob
    controller, fires when either a restricted day of the month or a restricted weekday
    matches); '' when the schedule cannot be read or never fires (the CronJob's own
    validation then reports it). croniter's six- and seven-field forms are not the
    CronJob's, so they are not read either."""
    text = str(schedule).strip()
    if not text.startswith("@") and len(text.split()) != _CRON_FIELDS:
        return ""
    try:
        start = datetime.datetime.fromisoformat(str(after).replace("Z", "+00:00"))
        fires = croniter.croniter(text, start).get_next(datetime.datetime)
    except (ValueError, KeyError, croniter.CroniterError):
        return ""
    return str(fires.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))


def latest_backup_problem(latest: Any, latest_database: Any, database: Any, claim: str,
                          annotation: str) -> str:
    """'' unless the latest backup (file ``latest``, the backup claim's ``annotation``) is
    known to hold another database than ``database`` (spec.database): then why a new data
    volume does not load it, and what to set instead. A dump names no database, so it would
    be loaded under the new name. A claim that does not name the latest backup's database
    (``latest_database`` '') is trusted."""
    if not latest or not latest_database or str(latest_database) == str(database):
        return ""
    return (f"latest is backup '{latest}' ({annotation} of the backup volume claim {claim}),"
            f" which holds database '{latest_database}', not spec.database '{database}': set"
            f" spec.database to '{latest_database}' to restore it, or spec.restore_from to none to"
            " start empty")


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "mysql_backup_by_age": by_age,
            "mysql_backup_facts": facts,
            "mysql_backup_excess": excess,
            "mysql_backup_latest": latest,
            "mysql_latest_backup_problem": latest_backup_problem,
            "mysql_backup_status": backup_status,
            "mysql_archive_condition": archive_condition,
            "mysql_backup_verified_condition": verified_condition,
            "mysql_cron_next": cron_next,
        }
