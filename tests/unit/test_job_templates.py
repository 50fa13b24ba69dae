"""The templates that make pods (the server's Deployment, every Job, the CronJob's Job), rendered:

- every pod writes what a tenant must not get at: no pod mounts a service account token (none
  of them talks to the API server), every Job's container and init container says its CPU and
  memory requests and limits (a namespace with a ResourceQuota and no LimitRange admits it),
  and every container that writes only to its pod's volumes has a read-only root filesystem;
- no string of the user's reaches a command line but through the environment, and every
  script those containers run hands the clients (mysql, mysqldump, mysqlbinlog) each value as
  an --option=value or after `--`: never as a word of its own, which the client would read as
  an option when it starts with '-' (a database `-h<address>` would send the Job's root login
  there, `-eSHUTDOWN` would run as root);
- every pod that writes a backup's position hands backup.sh the backup's lineage (the
  instance's <namespace>/<name> and its database), and every fetch for a point in time gets
  the restore's database and instance, which its choice of backup reads (mysql_common's
  files/objects.sh).

Rendered by Jinja itself with the roles' own filter plugins, Ansible's few filters the
templates use (to_json, combine, bool) and a file lookup as Ansible resolves it (a role's
files/, or a path from role_path); StrictUndefined, so a variable a template reads that the
test does not give fails the test rather than rendering empty. A template that makes a pod, or
runs backup.sh, and is not listed here fails the test too: each must be checked.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from tests import sources

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
PLUGINS = ROLES / "mysql_common" / "filter_plugins"
# the user's strings, as the objects give them: each may reach a pod's environment only
NAMESPACE, NAME, DATABASE = "team", "db", "db-name$1"
BACKUP_FILE, RESTORE_POINT = "bk-1.sql", "2026-11-27T16:04:05Z"
BACKUP_TEMPLATES = {
    "mysql/templates/backup-cronjob.yaml.j2",
    "mysql_backup/templates/dump-job.yaml.j2",
    "mysql_finalizer/templates/backup-job.yaml.j2",
}
JOB_TEMPLATES = BACKUP_TEMPLATES | {
    "mysql/templates/config-job.yaml.j2",
    "mysql/templates/restore-job.yaml.j2",
    "mysql/templates/rotate-job.yaml.j2",
    "mysql_backup/templates/prune-job.yaml.j2",
    "mysql_backup/templates/verify-job.yaml.j2",
    "mysql_restore/templates/load-job.yaml.j2",
}
POD_TEMPLATES = JOB_TEMPLATES | {"mysql/templates/deployment.yaml.j2"}
# The containers that run a server (a Job's throwaway one, or the instance's): its image's
# entrypoint and the server write where the images' option files say (/var/lib/mysql,
# /var/run/mysqld, /tmp), each a volume of the pod, as their root filesystem is read-only
# like every other container's.
SERVERS = {("mysql/templates/deployment.yaml.j2", "mysql"),
           ("mysql/templates/restore-job.yaml.j2", "restore"),
           ("mysql_backup/templates/verify-job.yaml.j2", "verify"),
           ("mysql_restore/templates/load-job.yaml.j2", "load")}
SERVER_WRITES = ("/var/lib/mysql", "/var/run/mysqld", "/tmp")
S3 = {"s3": {"endpoint": "http://s3:8333", "bucket": "b", "credentialsSecret": "s3-creds"},
      "encryptionSecret": "backup-key", "pointInTime": {"enabled": True}}
# a template's lookup of the mysql_backup role's files/backup.sh, from that role or another
RUNS_BACKUP_SH = re.compile(r"lookup\('ansible\.builtin\.file', [^)]*'(/\.\./mysql_backup/files/)?backup\.sh'\)")
objects = sources.load(PLUGINS / "mysql_objects.py", "mysql_objects")
RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}
SERVER_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}


def filters() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for path in sorted(PLUGINS.glob("*.py")):
        found.update(sources.load(path, path.stem).FilterModule().filters())
    found["to_json"] = json.dumps
    found["combine"] = lambda *dicts: {k: v for d in dicts for k, v in d.items()}
    found["bool"] = lambda value: str(value).lower() in {"true", "yes", "on", "1"}
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


def defaults(role: str) -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text(encoding="utf-8"))
    return found


def names_yml_facts() -> dict[str, Any]:
    """The facts mysql_common's tasks/names.yml sets, as written (templated ones unrendered)."""
    tasks = yaml.safe_load((ROLES / "mysql_common" / "tasks" / "names.yml").read_text(encoding="utf-8"))
    facts: dict[str, Any] = {}
    for task in tasks:
        facts.update(task.get("ansible.builtin.set_fact") or {})
    return facts


def names_of_an_instance() -> dict[str, Any]:
    """What mysql_common's tasks/names.yml sets (and its defaults), as far as the templates
    read it."""
    security = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    names_yml = names_yml_facts()
    return {
        **defaults("mysql_common"),
        "mysql_instance": {"name": NAME, "namespace": NAMESPACE, "uid": "0123abcd-uid", "host": "db.team.svc",
                           "direct_host": "db-direct.team.svc", "port": 3306},
        "mysql_names": {"credentials_secret": "db-credentials", "backup_pvc": "db-backup", "data_pvc": "db-data",
                        "backup_cronjob": "db-bk", "backup_job": "db-backup", "restore_job": "db-restore",
                        "deployment": "db", "health_secret": "db-health", "rotate_secret": "db-rotate",
                        "config_map": "db-config"},
        "mysql_keys": {"job": "otus.homework/job", "uid": "otus.homework/mysql-uid",
                       "backup_file": "otus.homework/backup-file", "client_defaults": "otus.homework/client-defaults",
                       "config_restart": "otus.homework/config-restart"},
        "mysql_labels": {"app.kubernetes.io/instance": NAME},
        "mysql_pod_labels": {"app.kubernetes.io/instance": NAME, "app": NAME},
        "mysql_selector_labels": {"app.kubernetes.io/instance": NAME},
        "mysql_owner_references": [],
        "mysql_primary_annotations": {},
        "mysql_pod_security_context": {"runAsNonRoot": True},
        "mysql_container_security_context": {**security, "readOnlyRootFilesystem": True},
        "mysql_server_scratch_mounts": names_yml["mysql_server_scratch_mounts"],
        "mysql_server_scratch_volumes": names_yml["mysql_server_scratch_volumes"],
        "mysql_backup_tools_image": "tools",
        "mysql_backup_target": objects.backup_target(S3, NAMESPACE, NAME),
        "database": DATABASE,
        "image": "mysql:8.4",
    }


def variables_of(template: str) -> dict[str, Any]:
    names = names_of_an_instance()
    role = template.split("/", 1)[0]
    if role == "mysql":
        return {**defaults("mysql"), **names, "backup": {"schedule": "@daily", **S3},
                "_otus_homework_mysql": {"spec": {"database": DATABASE, "metrics": {"enabled": True}}},
                "mysql_cronjob_api_version": "batch/v1", "mysql_restore_plan": RESTORE_POINT,
                "mysql_config_job": "db-config-1", "mysql_config_live": {"max_connections": "20"},
                "mysql_config_applied": {}, "mysql_config_restart_digest": "0123abcd", "mysql_config_dir": "/etc/x",
                "mysql_rotate_job": "db-rotate-1"}
    if role == "mysql_finalizer":
        return {**defaults("mysql_finalizer"), **names, "mysql_finalizer_backup_file": "db-name_1-20260101T000000Z.sql"}
    if role == "mysql_backup":
        record = {"dump_job": "bk-1-dump", "verify_job": "bk-1-verify", "namespace": NAMESPACE, "file": BACKUP_FILE,
                  "image": "mysql:8.4", "database": DATABASE, "target": names["mysql_backup_target"]}
        return {**defaults("mysql_backup"), **names, "mysql_backup_record": record, "mysql_backup_labels": {},
                "mysql_backup_owner_references": [], "mysql_backup_figures_sql": "SELECT 1",
                "mysql_backup_prune_job": "db-prune-1", "mysql_backup_prune": [{"name": "bk-0", "file": "bk-0.sql"}]}
    this = {"job": "undo-load", "namespace": NAMESPACE, "file": RESTORE_POINT, "database": DATABASE,
            "target": names["mysql_backup_target"]}
    return {**defaults("mysql_restore"), **names, "mysql_restore_this": this, "mysql_restore_labels": {},
            "mysql_restore_owner_references": [], "mysql_restore_instance": {"spec": {"image": "mysql:8.4"}}}


def pod_of(rendered: dict[str, Any]) -> dict[str, Any]:
    spec = rendered["spec"]
    job = spec["jobTemplate"]["spec"] if rendered["kind"] == "CronJob" else spec
    pod: dict[str, Any] = job["template"]["spec"]
    return pod


def containers_of(pod: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = pod.get("initContainers", []) + pod["containers"]
    return found


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container.get("env", [])}


def rendered_pods() -> Iterator[tuple[str, dict[str, Any]]]:
    for template in sorted(POD_TEMPLATES):
        yield template, pod_of(render(template, variables_of(template)))


# --- what each pod gets --------------------------------------------------------------------

def test_every_template_that_makes_a_pod_is_checked_here() -> None:
    making = {str(path.relative_to(ROLES)) for path in ROLES.glob("*/templates/*.j2")
              if re.search(r"^\s*containers:", path.read_text(encoding="utf-8"), re.MULTILINE)}
    assert making == POD_TEMPLATES


@pytest.mark.parametrize("template", sorted(POD_TEMPLATES))
def test_no_pod_mounts_a_service_account_token(template: str) -> None:
    """None of them talks to the API server: a token in it would be the tenant's to take (a
    spec.image of theirs runs in most of them)."""
    pod = pod_of(render(template, variables_of(template)))
    assert pod["automountServiceAccountToken"] is False


@pytest.mark.parametrize("template", sorted(JOB_TEMPLATES))
def test_every_job_container_says_its_requests_and_limits(template: str) -> None:
    pod = pod_of(render(template, variables_of(template)))
    for container in containers_of(pod):
        resources = container.get("resources") or {}
        assert set(resources) == {"requests", "limits"}, (container["name"], resources)
        for part in ("requests", "limits"):
            assert set(resources[part]) == {"cpu", "memory"}, (container["name"], part, resources)


def test_the_throwaway_servers_get_room_for_a_server_and_the_clients_less() -> None:
    """A verification's and a restore's container run a whole server (the instance's image,
    its default settings): the server's own default request, and a limit it fits in; the
    clients' and the backup-tools containers less."""
    servers = SERVERS - {("mysql/templates/deployment.yaml.j2", "mysql")}
    for template, pod in rendered_pods():
        if template in JOB_TEMPLATES:
            for container in containers_of(pod):
                expected = SERVER_RESOURCES if (template, container["name"]) in servers else RESOURCES
                assert container["resources"] == expected, (template, container["name"])
    assert defaults("mysql")["mysql_default_resources"]["requests"] == SERVER_RESOURCES["requests"]


@pytest.mark.parametrize("template", sorted(POD_TEMPLATES))
def test_every_container_writes_only_to_volumes_of_its_pod(template: str) -> None:
    pod = pod_of(render(template, variables_of(template)))
    volumes = {volume["name"]: volume for volume in pod.get("volumes", [])}
    for container in containers_of(pod):
        assert (container.get("securityContext") or {}).get("readOnlyRootFilesystem") is True, \
            (template, container["name"])
        mounts = {mount["mountPath"]: mount for mount in container.get("volumeMounts", [])}
        # the scratch space of a script that has one (mktemp, its clients' errors) is a volume
        needs = set(SERVER_WRITES) if (template, container["name"]) in SERVERS else set()
        if any("mktemp" in script or "/tmp/" in script for script in scripts_of(container)):
            needs.add("/tmp")
        for path in sorted(needs):
            assert path in mounts and not mounts[path].get("readOnly"), (template, container["name"], path)
            volume = volumes[mounts[path]["name"]]
            assert "emptyDir" in volume or "persistentVolumeClaim" in volume, (template, container["name"], path)


def scripts_of(container: dict[str, Any]) -> list[str]:
    """The shell scripts a container runs: its command's (sh -c or bash -c) and its probe's."""
    found = []
    for command in (container.get("command") or [],
                    ((container.get("readinessProbe") or {}).get("exec") or {}).get("command") or []):
        if len(command) == 3 and command[0] in {"/bin/sh", "/bin/bash"} and command[1] == "-c":
            found.append(command[2])
    return found


# --- how the user's strings reach a command line ------------------------------------------

CLIENTS = {"mysql", "mysqldump", "mysqlbinlog", "mysqladmin", "mariadb", "mariadb-dump", "mariadb-binlog",
           "mariadb-admin"}
# restore.sh's own list of mysqldump options (words it sets to constants: checked below)
OPTION_LISTS = {"$dump_options"}
_PUNCTUATION = "();<>|&\n"


def words(script: str) -> list[str]:
    """The words of a shell script as sh splits them (quotes removed), its operators and
    newlines as words of their own, comments left out."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=_PUNCTUATION)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    return list(lexer)


def _operator(word: str) -> bool:
    return bool(word) and all(c in _PUNCTUATION for c in word)


def wrappers(script_words: list[str]) -> set[str]:
    """The functions that run a client with their own arguments ("$@"), and those that run
    such a function: their calls are client command lines too. (A function that sets its
    arguments itself, `set -- ...`, hands on its own words, not its caller's.)"""
    commands, found = set(CLIENTS), set()
    changed = True
    while changed:
        changed = False
        for i, word in enumerate(script_words[:-2]):
            if script_words[i + 1] != "()" or script_words[i + 2] != "{" or word in found:
                continue
            depth, body = 0, []
            for later in script_words[i + 2:]:
                depth += (later == "{") - (later == "}")
                body.append(later)
                if depth == 0:
                    break
            own = ("set", "--") in set(itertools.pairwise(body))
            if "$@" in body and commands & set(body) and not own:
                found.add(word)
                commands.add(word)
                changed = True
    return found


def bare_values(script: str) -> list[list[str]]:
    """The client command lines (mysql and its kin, and the functions that wrap them) with a
    value that is a word of its own: an expansion not in an --option=value, not after `--`,
    and not after a literal character other than '-' (a path, an SQL statement); each as the
    command's words up to that value. A redirection's target is no argument."""
    script_words = words(script)
    commands = CLIENTS | wrappers(script_words)
    found = []
    for i, word in enumerate(script_words):
        if word not in commands:
            continue
        line, after_dashes, redirected = [word], False, False
        for later in script_words[i + 1:]:
            if _operator(later) and not set(later) & {"<", ">"}:
                break
            line.append(later)
            if _operator(later):
                redirected = True
                continue
            if redirected:
                redirected = False
                continue
            if later == "--":
                after_dashes = True
            if "$" not in later or after_dashes or later in OPTION_LISTS | {"$@"}:
                continue
            if re.match(r"^--[A-Za-z0-9-]+=", later) or not later.startswith(("-", "$")):
                continue
            found.append(line)
            break
    return found


def test_the_check_finds_a_value_given_as_a_word_of_its_own() -> None:
    """Each of these lets a database named -h<address> or -eSHUTDOWN speak to the client as
    an option."""
    bad = [
        'client() { mysql --protocol=TCP "$@"; }\nclient -e "SELECT 1" "$MYSQL_DATABASE" > /dev/null',
        'mysql -h "$MYSQL_HOST" -P "$MYSQL_PORT" --user=root',
        'login() {\n  mysql --protocol=TCP "$@"\n}\nx=$(login -u"$MYSQL_HEALTH_USER" -e "SELECT 1")',
        'mysqldump --user=root "$MYSQL_DATABASE" -- x > "$out"',
        'session() { (set +e; client -N "$DB" < "$d/in") & }\nclient() { mysql "$@"; }',
    ]
    for script in bad:
        assert bare_values(script), script
    good = [
        'client() { mysql --protocol=TCP "$@"; }\nclient --database="$MYSQL_DATABASE" -e "SELECT 1" > /dev/null 2>&1',
        'mysqldump --host="$H" $dump_options -- "$MYSQL_DATABASE" > "$1" 2> "$work/err"',
        'mysqlbinlog --start-position="$from" "/backup/binlogs/$log"',
        'live() { mysql "$@"; }\nlive -e "DROP DATABASE `$MYSQL_DATABASE`" < "$file"',
    ]
    for script in good:
        assert bare_values(script) == [], script


def every_script() -> dict[str, str]:
    """Each script the rendered containers run, by its text, with where it runs."""
    found: dict[str, str] = {}
    for template, pod in rendered_pods():
        for container in containers_of(pod):
            for script in scripts_of(container):
                found.setdefault(script, f"{template}: {container['name']}")
    return found


def test_every_script_of_the_roles_runs_in_a_rendered_container() -> None:
    scripts = set(every_script())
    for path in sorted(ROLES.glob("*/files/*.sh")):
        assert path.read_text(encoding="utf-8") in scripts, path


def test_no_script_hands_a_client_a_value_as_a_word_of_its_own() -> None:
    assert {where: bare_values(script) for script, where in every_script().items() if bare_values(script)} == {}


def test_the_option_lists_are_constant_words() -> None:
    """restore.sh's $dump_options (unquoted on purpose: one word per option) holds only
    options it spells out itself."""
    script = (ROLES / "mysql_common/files/restore.sh").read_text(encoding="utf-8")
    assignments = re.findall(r"^\s*dump_options=(.*)$", script, re.MULTILINE)
    assert assignments
    for value in assignments:
        for word in " ".join(shlex.split(value)).split():
            assert word == "$dump_options" or (word.startswith("--") and "$" not in word), value


@pytest.mark.parametrize("template", sorted(POD_TEMPLATES))
def test_the_users_strings_reach_the_pods_through_their_environment_only(template: str) -> None:
    """The database, the backup's file and the restore's time never are on a command line,
    nor in a probe's or a sidecar's arguments: each container has them as values of its
    environment, which its script hands on as above."""
    pod = pod_of(render(template, variables_of(template)))
    for container in containers_of(pod):
        probe = ((container.get("readinessProbe") or {}).get("exec") or {}).get("command") or []
        for word in [*(container.get("command") or []), *(container.get("args") or []), *probe]:
            for value in (DATABASE, BACKUP_FILE, RESTORE_POINT):
                assert value not in word, (template, container["name"], value)
    env = {name: value for c in containers_of(pod) for name, value in env_of(c).items()}
    if "MYSQL_DATABASE" in env:
        assert env["MYSQL_DATABASE"] == DATABASE


# --- what a backup hands on ----------------------------------------------------------------

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
