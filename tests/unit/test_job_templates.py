"""The Job templates that run a backup or a point-in-time restore, rendered: every pod that
writes a backup's position hands backup.sh the backup's lineage (the instance's
<namespace>/<name> and its database), and every fetch for a point in time gets the restore's
database and instance, which its choice of backup reads (mysql_common's files/objects.sh).

Rendered by Jinja itself with the roles' own filter plugins, Ansible's few filters the
templates use (to_json, combine) and a file lookup as Ansible resolves it (a role's files/,
or a path from role_path); StrictUndefined, so a variable a template reads that the test
does not give fails the test rather than rendering empty. A template that runs backup.sh and
is not listed here fails the test too: each must be checked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from tests import sources

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
PLUGINS = ROLES / "mysql_common" / "filter_plugins"
NAMESPACE, NAME, DATABASE = "team", "db", "app$1"
BACKUP_TEMPLATES = {
    "mysql/templates/backup-cronjob.yaml.j2",
    "mysql_backup/templates/dump-job.yaml.j2",
    "mysql_finalizer/templates/backup-job.yaml.j2",
}
S3 = {"s3": {"endpoint": "http://s3:8333", "bucket": "b", "credentialsSecret": "s3-creds"},
      "encryptionSecret": "backup-key", "pointInTime": {"enabled": True}}
# a template's lookup of the mysql_backup role's files/backup.sh, from that role or another
RUNS_BACKUP_SH = re.compile(r"lookup\('ansible\.builtin\.file', [^)]*'(/\.\./mysql_backup/files/)?backup\.sh'\)")
objects = sources.load(PLUGINS / "mysql_objects.py", "mysql_objects")


def filters() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for path in sorted(PLUGINS.glob("*.py")):
        found.update(sources.load(path, path.stem).FilterModule().filters())
    found["to_json"] = json.dumps
    found["combine"] = lambda *dicts: {k: v for d in dicts for k, v in d.items()}
    return found


def render(template: str, variables: dict[str, Any]) -> dict[str, Any]:
    path = ROLES / template
    role = path.parents[1]

    def lookup(kind: str, name: str) -> str:
        assert kind == "ansible.builtin.file", kind
        found = Path(name) if Path(name).is_absolute() else role / "files" / name
        return found.read_text(encoding="utf-8")

    # YAML, not HTML: nothing to escape (Ansible renders these templates unescaped too)
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False,  # noqa: S701
                                     keep_trailing_newline=True)
    environment.filters.update(filters())
    environment.globals["lookup"] = lookup
    text = environment.from_string(path.read_text(encoding="utf-8")).render(role_path=str(role), **variables)
    rendered: dict[str, Any] = yaml.safe_load(text)
    return rendered


def names_of_an_instance() -> dict[str, Any]:
    """What mysql_common's tasks/names.yml sets, as far as the templates read it."""
    return {
        "mysql_instance": {"name": NAME, "namespace": NAMESPACE, "uid": "0123abcd-uid", "host": "db.team.svc",
                           "port": 3306},
        "mysql_names": {"credentials_secret": "db-credentials", "backup_pvc": "db-backup",
                        "backup_cronjob": "db-bk", "backup_job": "db-backup", "restore_job": "db-restore"},
        "mysql_keys": {"job": "otus.homework/job", "uid": "otus.homework/mysql-uid",
                       "backup_file": "otus.homework/backup-file"},
        "mysql_labels": {"app.kubernetes.io/instance": NAME},
        "mysql_owner_references": [],
        "mysql_primary_annotations": {},
        "mysql_pod_security_context": {},
        "mysql_container_security_context": {},
        "mysql_backup_tools_image": "tools",
        "mysql_backup_target": objects.backup_target(S3, NAMESPACE, NAME),
        "database": DATABASE,
        "image": "mysql:8.4",
    }


def variables_of(template: str) -> dict[str, Any]:
    names = names_of_an_instance()
    role = template.split("/", 1)[0]
    if role == "mysql":
        return {**names, "backup": {"schedule": "@daily", **S3}, "mysql_cronjob_api_version": "batch/v1",
                "mysql_backup_job_timeout": 600, "mysql_image_pull_policy": "Never",
                "mysql_job_connect_timeout": 60, "mysql_restore_plan": "2026-11-27T16:04:05Z",
                "mysql_job_backoff_limit": 0, "mysql_restore_timeout": 600, "mysql_restore_start_timeout": 60}
    if role == "mysql_finalizer":
        return {**names, "mysql_finalizer_backup_file": "app-1.sql", "mysql_finalizer_job_backoff_limit": 0,
                "mysql_finalizer_backup_timeout": 600, "mysql_finalizer_image_pull_policy": "Never",
                "mysql_finalizer_job_connect_timeout": 60}
    if role == "mysql_backup":
        record = {"dump_job": "bk-1-dump", "namespace": NAMESPACE, "file": "bk-1.sql", "image": "mysql:8.4",
                  "database": DATABASE, "target": names["mysql_backup_target"]}
        return {**names, "mysql_backup_record": record, "mysql_backup_labels": {}, "mysql_backup_owner_references": [],
                "mysql_backup_job_backoff_limit": 0, "mysql_backup_dump_timeout": 600,
                "mysql_backup_image_pull_policy": "Never", "mysql_backup_connect_timeout": 60,
                "mysql_backup_figures_sql": "SELECT 1"}
    this = {"job": "undo-load", "namespace": NAMESPACE, "file": "2026-11-27T16:04:05Z", "database": DATABASE,
            "target": names["mysql_backup_target"]}
    return {**names, "mysql_restore_this": this, "mysql_restore_labels": {}, "mysql_restore_owner_references": [],
            "mysql_restore_load_timeout": 600, "mysql_restore_image_pull_policy": "Never",
            "mysql_restore_instance": {"spec": {"image": "mysql:8.4"}}, "mysql_restore_connect_timeout": 60,
            "mysql_restore_start_timeout": 60}


def pod_of(rendered: dict[str, Any]) -> dict[str, Any]:
    spec = rendered["spec"]
    job = spec["jobTemplate"]["spec"] if rendered["kind"] == "CronJob" else spec
    pod: dict[str, Any] = job["template"]["spec"]
    return pod


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container.get("env", [])}


def test_every_template_that_runs_backup_sh_is_checked_here() -> None:
    running = {str(path.relative_to(ROLES)) for path in ROLES.glob("*/templates/*.j2")
               if RUNS_BACKUP_SH.search(path.read_text(encoding="utf-8"))}
    assert running == BACKUP_TEMPLATES


@pytest.mark.parametrize("template", sorted(BACKUP_TEMPLATES))
def test_every_backup_hands_backup_sh_its_lineage(template: str) -> None:
    """backup.sh writes MYSQL_INSTANCE and MYSQL_DATABASE into the position: the instance's
    <namespace>/<name> (what a point-in-time fetch of that instance prefers) and the database
    the dump holds."""
    pod = pod_of(render(template, variables_of(template)))
    backup = next(c for c in pod["containers"] if c["name"] == "backup")
    # backup.sh itself, embedded
    assert backup["command"][2] == (ROLES / "mysql_backup/files/backup.sh").read_text(encoding="utf-8")
    env = env_of(backup)
    assert (env["MYSQL_INSTANCE"], env["MYSQL_DATABASE"]) == (f"{NAMESPACE}/{NAME}", DATABASE)
    # the objects container beside it ships what backup.sh wrote
    assert env_of(next(c for c in pod["containers"] if c["name"] == "objects"))["MODE"] == "ship"


@pytest.mark.parametrize("template", ["mysql/templates/restore-job.yaml.j2",
                                      "mysql_restore/templates/load-job.yaml.j2"])
def test_every_point_in_time_fetch_gets_the_restores_database_and_instance(template: str) -> None:
    pod = pod_of(render(template, variables_of(template)))
    fetch = env_of(next(c for c in pod["initContainers"] if c["name"] == "objects"))
    assert fetch["MODE"] == "fetch" and fetch["POINT_IN_TIME"] == "1795795446"
    assert (fetch["MYSQL_INSTANCE"], fetch["MYSQL_DATABASE"]) == (f"{NAMESPACE}/{NAME}", DATABASE)
