"""The roles' scripts that run the MySQL clients, run for real against stand-in clients that
record their arguments: given a database (and every other value of their environment) that
starts with '-', no client gets it as a word of its own, only as an --option=value or after
`--`. A word of its own starting with '-' is an option to the client: a database named
-h<address> sends the Job's root login to that address, -eSHUTDOWN runs SHUTDOWN as root.

The scripts run under dash (Debian's sh, as strict as any image's) and verify.sh under bash,
their fixed paths (/backup, /tmp, /dev/termination-log, the credentials' mount, the throwaway
server's data directory) pointed into the test's directory. The stand-ins answer what each
script asks as a server would for an empty database: backup.sh takes its lock, snapshot and
dump, verify.sh and restore.sh (a backup, and a point in time: a throwaway server, binary logs
replayed) load it; each script ends with success, so every client it runs has been run.
tests/unit/test_job_templates.py checks the same of every script's text; this shows it on
the command lines the clients really get.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = {
    "readiness": ROOT / "roles/mysql/files/readiness.sh",
    "config": ROOT / "roles/mysql/files/config.sh",
    "rotate": ROOT / "roles/mysql/files/rotate.sh",
    "backup": ROOT / "roles/mysql_backup/files/backup.sh",
    "verify": ROOT / "roles/mysql_backup/files/verify.sh",
    "restore": ROOT / "roles/mysql_common/files/restore.sh",
}
DASH = shutil.which("dash") or "/bin/sh"
BASH = shutil.which("bash") or "/bin/bash"
# what a client reads as its own options, each as a database's name (the CRD and the roles
# refuse them; the scripts must not depend on that), and a name they take
OPTION_FORMS = ["-hevil", "-eSHUTDOWN", "--init-command=x"]
TRAILER = "-- Dump completed on 2026-01-01  0:00:00"
# the paths the scripts have fixed (their pods' mounts), and where they are in a test's directory
FIXED_PATHS = {"/backup": "backup", "/dev/termination-log": "termination-log",
               "/etc/mysql-operator/credentials": "credentials", "/rotate/": "rotate/", "/var/lib/mysql": "data",
               "/tmp/": "tmp/"}

# The stand-in for mysql, mysqldump, mysqlbinlog and the image's docker-entrypoint.sh: each
# call is logged to $CLIENT_LOG as a JSON list (its name, then its arguments); mysql answers
# a statement (-e/--execute) or, in a session fed on its standard input, each line, as a server
# would for an empty database; mysqldump writes a dump of nothing.
STUB = r'''
import json
import os
import sys

name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
with open(os.environ["CLIENT_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps([name, *args]) + "\n")

ANSWERS = [  # (a part of the statement, the answer's lines)
    ("SELECT VERSION()", ["8.4.0"]), ("SELECT @@version", ["8.4.0"]),
    ("INNODB_TRX", ["1"]), ("GROUP_CONCAT", ["NULL"]), ("binlog_archive", []),
    ("SCHEMATA", ["utf8mb4 utf8mb4_0900_ai_ci"]), ("information_schema.TABLES", ["0"]),
    ("root_version", ["v1"]), ("SHOW REPLICA STATUS", [
        "Relay_Log_File: relay.000001", "Relay_Log_Pos: 4", "Last_SQL_Errno: 0",
        "Replica_SQL_Running_State: Replica has read all relay log; waiting for more updates"]),
    ("CONCAT('guard '", ["guard 1"]), ("'instance-locked'", ["instance-locked"]),
    ("CONCAT('locked '", ["locked 10.0.0.1"]), ("CONCAT('snapshot '", ["snapshot 5"]),
    ("'figures-end'", ["figures-end"]),
]


def answer(statement):
    for part, lines in ANSWERS:
        if part in statement:
            for line in lines:
                print(line, flush=True)
            return


def statement():
    for i, arg in enumerate(args):
        if arg == "-e" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--execute="):
            return arg[len("--execute="):]
    return None


if name == "mysqldump":
    if "--help" in args:
        print("  --set-gtid-purged[=name]")
    else:
        print("-- MySQL dump 10.13\nSET NAMES utf8mb4;\n" + os.environ["STUB_TRAILER"], flush=True)
elif name == "mysql":
    given = statement()
    if given is not None:
        answer(given)
    else:
        while line := sys.stdin.readline():
            answer(line)
'''


@dataclass
class Run:
    returncode: int
    output: str
    calls: list[list[str]]


@dataclass
class Rig:
    root: Path

    def run(self, script: str, **env: str) -> Run:
        """``script`` with its fixed paths under the rig's directory, the stand-ins first on
        PATH, ``env`` its whole environment besides."""
        text = re.sub("|".join(re.escape(fixed) for fixed in FIXED_PATHS),
                      lambda found: f"{self.root}/{FIXED_PATHS[found[0]]}", SCRIPTS[script].read_text(encoding="utf-8"))
        log = self.root / "calls.log"
        log.unlink(missing_ok=True)
        done = subprocess.run(
            [BASH if script == "verify" else DASH, "-c", text], capture_output=True, text=True, timeout=120,
            check=False, cwd=self.root,
            env={"PATH": f"{self.root / 'bin'}:/usr/bin:/bin", "TMPDIR": str(self.root / "tmp"),
                 "CLIENT_LOG": str(log), "STUB_TRAILER": TRAILER, **env})
        calls = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
        return Run(done.returncode, done.stdout + done.stderr, calls)


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    stub = tmp_path / "bin" / "client"
    stub.parent.mkdir()
    stub.write_text(f"#!{sys.executable}\n{STUB}", encoding="utf-8")
    stub.chmod(0o755)
    for name in ("mysql", "mysqldump", "mysqlbinlog", "docker-entrypoint.sh"):
        (tmp_path / "bin" / name).symlink_to(stub)
    for directory in ("backup", "tmp", "credentials", "rotate", "data"):
        (tmp_path / directory).mkdir()
    (tmp_path / "credentials" / "password").write_text("pw", encoding="utf-8")
    (tmp_path / "credentials" / "password-version").write_text("v1", encoding="utf-8")
    (tmp_path / "rotate" / "rotate.sql").write_text("SELECT 1;\n", encoding="utf-8")
    return Rig(tmp_path)


def words_of_their_own(calls: list[list[str]], values: list[str]) -> list[list[str]]:
    """The calls of a client with a word (before `--`) that starts with one of ``values``: a
    word the client reads as an option of its own."""
    found = []
    for call in calls:
        name, args = call[0], call[1:]
        if name == "docker-entrypoint.sh":
            args = args[1:]  # the server's name, then its options
        before = args[:args.index("--")] if "--" in args else args
        if any(word.startswith(value) for word in before for value in values):
            found.append(call)
    return found


def server_env(database: str) -> dict[str, str]:
    """What every Job's client script is given, each value one a client would misread."""
    return {"MYSQL_HOST": "-hevil.example", "MYSQL_PORT": "-P1", "MYSQL_DATABASE": database,
            "MYSQL_PWD": "-pw", "CONNECT_TIMEOUT": "6", "START_TIMEOUT": "6"}


@pytest.mark.parametrize("database", [*OPTION_FORMS, "db-name$1"])
def test_the_readiness_probe_names_the_database_as_an_option_value(rig: Rig, database: str) -> None:
    run = rig.run("readiness", MYSQL_DATABASE=database, MYSQL_HEALTH_USER="-uevil", MYSQL_HEALTH_PASSWORD="x",
                  MYSQL_OPERATOR_SCHEMA="mysql_operator", MYSQL_OPERATOR_PORT="-P1")
    assert run.returncode == 0, run.output
    assert [f"--database={database}" in call for call in run.calls] == [False, True]
    assert words_of_their_own(run.calls, [database, "-uevil", "-P1"]) == []


def test_the_config_and_password_jobs_give_every_value_as_an_option_value(rig: Rig) -> None:
    env = server_env("app")
    run = rig.run("config", **env, ROOT_PASSWORD="-pw", STATEMENTS="SET GLOBAL max_connections = 20;")
    assert run.returncode == 0, run.output
    assert len(run.calls) == 2 and words_of_their_own(run.calls, ["-hevil", "-P1"]) == []
    run = rig.run("rotate", **env, NEW_PASSWORD="-new", OLD_PASSWORD="", BOOTSTRAP_PASSWORD="-boot",
                  HEALTH_USER="-uevil", HEALTH_PASSWORD="-hp", OPERATOR_SCHEMA="mysql_operator")
    assert run.returncode == 0, run.output
    assert len(run.calls) == 4 and words_of_their_own(run.calls, ["-hevil", "-P1", "-uevil"]) == []


@pytest.mark.parametrize("database", [*OPTION_FORMS, "db-name$1"])
def test_a_backup_names_the_database_as_an_option_value_or_after_dashes(rig: Rig, database: str) -> None:
    run = rig.run("backup", **server_env(database), BACKUP_FILE="bk-1.sql", FIGURES_SQL="SELECT 1;",
                  MYSQL_INSTANCE="team/db", LOCK_WAIT="1", GUARD_WAIT="5")
    assert run.returncode == 0, run.output
    assert (rig.root / "backup" / "bk-1.sql").read_text(encoding="utf-8").endswith(TRAILER + "\n")
    assert words_of_their_own(run.calls, [database, "-hevil", "-P1"]) == []
    dumps = [call for call in run.calls if call[0] == "mysqldump" and "--help" not in call]
    assert [call[-2:] for call in dumps] == [["--", database]]
    # every session and look that reads the database names it as --database=
    assert sum(f"--database={database}" in call for call in run.calls) >= 4


@pytest.mark.parametrize("database", [*OPTION_FORMS, "db-name$1"])
def test_a_verification_names_the_database_as_an_option_value(rig: Rig, database: str) -> None:
    (rig.root / "backup" / "bk-1.sql").write_text(f"SET NAMES utf8mb4;\n{TRAILER}\n", encoding="utf-8")
    (rig.root / "backup" / "bk-1.sql.figures").write_text("", encoding="utf-8")
    run = rig.run("verify", MYSQL_DATABASE=database, BACKUP_FILE="bk-1.sql", FIGURES_SQL="SELECT 1;",
                  START_TIMEOUT="6")
    assert run.returncode == 0, run.output
    assert run.output.strip().endswith("verify: verified tables=0 rows=0 size=60")
    assert words_of_their_own(run.calls, [database]) == []
    assert sum(f"--database={database}" in call for call in run.calls) == 3


@pytest.mark.parametrize("database", [*OPTION_FORMS, "db-name$1"])
def test_a_restore_names_the_database_as_an_option_value_or_after_dashes(rig: Rig, database: str) -> None:
    (rig.root / "backup" / "bk-1.sql").write_text(f"SET NAMES utf8mb4;\n{TRAILER}\n", encoding="utf-8")
    run = rig.run("restore", **server_env(database), BACKUP_FILE="bk-1.sql")
    assert run.returncode == 0, run.output
    assert words_of_their_own(run.calls, [database, "-hevil", "-P1"]) == []
    # the safety copy: the database after --
    assert [call[-2:] for call in run.calls if call[0] == "mysqldump" and "--help" not in call] == [["--", database]]


@pytest.mark.parametrize("database", [*OPTION_FORMS, "db-name$1"])
def test_a_point_in_time_restore_names_the_database_as_an_option_value(rig: Rig, database: str) -> None:
    """The throwaway server too: its replication filter names the database in an option's
    value, and its clients and its dump name it as the live server's do."""
    (rig.root / "backup" / "bk-1.sql").write_text(f"SET NAMES utf8mb4;\n{TRAILER}\n", encoding="utf-8")
    (rig.root / "backup" / "binlogs").mkdir()
    (rig.root / "backup" / "binlogs" / "mysql-bin.000001").write_bytes(b"\xfebin")
    (rig.root / "backup" / "binlogs" / "replay").write_text("4\nmysql-bin.000001\n", encoding="utf-8")
    run = rig.run("restore", **server_env(database), BACKUP_FILE="bk-1.sql", STOP_DATETIME="2026-11-27 16:04:06",
                  TZ="UTC")
    assert run.returncode == 0, run.output
    assert "binlogs=1" in run.output
    assert words_of_their_own(run.calls, [database, "-hevil", "-P1"]) == []
    server = next(call for call in run.calls if call[0] == "docker-entrypoint.sh")
    assert any(word.startswith("--replicate-wild-do-table=") for word in server), server
    dumps = [call for call in run.calls if call[0] == "mysqldump" and "--help" not in call]
    assert [call[-2:] for call in dumps] == [["--", database], ["--", database]]


def test_the_check_sees_a_word_of_its_own() -> None:
    assert words_of_their_own([["mysql", "--user=root", "-hevil"]], ["-hevil"]) == [["mysql", "--user=root", "-hevil"]]
    assert words_of_their_own([["mysqldump", "--user=root", "--", "-hevil"]], ["-hevil"]) == []
    assert words_of_their_own([["mysql", "--database=-hevil", "-e", "SELECT '-hevil'"]], ["-hevil"]) == []
    assert os.path.isabs(DASH) and os.path.isabs(BASH)
