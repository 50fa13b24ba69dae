"""Backups users run every day, on both server images, against the real cluster: MySQLBackup
records taken on demand and verified while the database is being written, the latest-backup
marker never written over a claim changed since it was read, a restore point
chosen at creation (`spec.restore_from`) and its refusals, verification that fails on a
truncated or altered file, a schedule with retention, and a scheduled dump killed mid-way;
at the end, every pod all of that made was admitted at Pod Security "restricted".

One namespace and one operator for the module. The scheduled instances are created first, so
their runs (every minute) accumulate while the first tests use the other instances; the
schedule's test comes third and removes the schedules once it has seen what it needs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import figures, harness, kube
from tests.integration import operator_harness as oh

SERVERS = oh.SERVERS
PASSWORD = "otuspassword"
DATABASE = "otus-database"
BIG_ROWS = 1 << 17  # ~27 MB dumped: long enough to be killed mid-way (faults.py says why)


@dataclass
class Backups:
    cluster: harness.Cluster
    ns: str
    operator: harness.Operator
    scheduled_from: float  # when the scheduled instances were created (time.time())
    kills: dict[str, threading.Thread]  # per scheduled instance: kills one of its dumps mid-way
    killed: dict[str, str | BaseException]  # what each saw at its kill, or its error


@pytest.fixture(scope="module")
def backups(cluster: harness.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backups]:
    with oh.module_namespace(cluster, "backups") as ns, \
            oh.operator_in(cluster, ns, tmp_path_factory.mktemp("backups-operator")) as operator:
        started = time.time()
        for server in SERVERS:
            cluster.apply(oh.mysql_object(server.name("sched"), ns, image=server.image,
                                          backup={"schedule": "* * * * *", "keep": 2}))
            cluster.apply(oh.mysql_object(server.name("bk"), ns, image=server.image, backup={"verify": True}))
        try:
            for server in SERVERS:
                for name in (server.name("sched"), server.name("bk")):
                    oh.wait_successful(cluster, ns, name, operator)
                    oh.wait_ready(cluster, ns, name)
            b = Backups(cluster, ns, operator, started, {}, {})
            for server in SERVERS:  # under way while the other tests run
                b.kills[server.key] = threading.Thread(target=kill_a_scheduled_dump, args=(b, server.name("sched")))
                b.kills[server.key].start()
            yield b
        except BaseException:
            print(oh.diagnostics(cluster, ns, operator))
            raise


# --- helpers ---------------------------------------------------------------------------------

def server_pod_name(cluster: harness.Cluster, ns: str, name: str) -> str:
    pods = [p for p in cluster.get("-n", ns, "pods", "-l", f"app={name}")["items"]
            if not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") == "Running"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return str(pods[0]["metadata"]["name"])


def sql(cluster: harness.Cluster, ns: str, name: str, statement: str) -> str:
    """Run SQL in the server's pod the way the seed walkthrough does (kubectl exec, mysql -p)."""
    pod = server_pod_name(cluster, ns, name)
    return cluster.kubectl("-n", ns, "exec", pod, "--", "mysql", "-uroot", f"-p{PASSWORD}", "-N", "-B",
                           DATABASE, "-e", statement, timeout=300).stdout


def backup_object(ns: str, name: str, instance: str, **spec: Any) -> str:
    return json.dumps({"apiVersion": "otus.homework/v1", "kind": "MySQLBackup",
                       "metadata": {"name": name, "namespace": ns}, "spec": {"instance": instance, **spec}})


def stated_record(b: Backups, name: str, instance: str, file: str, image: str) -> None:
    """A record of a file the test put on the backup volume, stated as the operator states
    its own (the status, which only the operator's account and the admin may write): a
    record whose spec alone names a file is refused as no backup of the operator's."""
    b.cluster.apply(backup_object(b.ns, name, instance, file=file, database=DATABASE))
    facts = {"status": {"instance": instance, "origin": "operator", "file": file, "job": "",
                        "database": DATABASE, "image": image, "target": {}}}
    b.cluster.kubectl("-n", b.ns, "patch", "mysqlbackups.otus.homework", name, "--subresource=status",
                      "--type=merge", "-p", json.dumps(facts))


record = oh.backup_record
records = oh.backup_records
verified = oh.backup_verified


def older_backup(b: Backups, name: str) -> str:
    """The record <name>-older of instance `name`: a complete backup holding the table marks
    with the one row (1, 'older'), taken now unless an earlier test of the module took it (so
    that each test that reads it also runs alone)."""
    older = f"{name}-older"
    if any(r["metadata"]["name"] == older for r in records(b.cluster, b.ns, name)):
        return older
    sql(b.cluster, b.ns, name, "CREATE TABLE marks (id INT PRIMARY KEY, v VARCHAR(20)); "
                               "INSERT INTO marks VALUES (1, 'older')")
    b.cluster.apply(backup_object(b.ns, older, name))
    assert wait_decided(b, older)["status"]["state"] == "Complete"
    return older


def wait_decided(b: Backups, name: str, timeout: float = 600) -> dict[str, Any]:
    """Wait until the record's dump is Complete or Failed and its verification decided."""
    return oh.wait_backup_decided(b.cluster, b.ns, name, b.operator, timeout)


# --- tests -----------------------------------------------------------------------------------

def test_an_on_demand_backup_taken_during_writes_is_verified_against_its_own_snapshot(backups: Backups) -> None:
    """A MySQLBackup naming an instance takes a backup now. Rows are inserted all the while (one
    a statement, from a second client): the figures the verification compares with must come
    from the dump's own snapshot, or the counts differ and the backup is wrongly not Verified."""
    b = backups

    def one(server: oh.Server) -> None:
        name = server.name("bk")
        sql(b.cluster, b.ns, name, "CREATE TABLE busy (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(40), "
                                   "at TIMESTAMP(6) NULL, blob_col BLOB); "
                                   "INSERT INTO busy (v, at, blob_col) VALUES ('a', NOW(6), 0x00ff), (NULL, NULL, NULL); "
                                   + "INSERT INTO busy (v, at, blob_col) SELECT v, at, blob_col FROM busy; " * 12)
        pod = server_pod_name(b.cluster, b.ns, name)
        writer = subprocess.Popen(
            [b.cluster.kubectl_bin, "--kubeconfig", b.cluster.kubeconfig, "-n", b.ns, "exec", pod, "--", "sh", "-c",
             "end=$(($(date +%s) + 120)); while [ \"$(date +%s)\" -lt \"$end\" ]; do "
             f"mysql -uroot -p{PASSWORD} {DATABASE} -e "
             "\"INSERT INTO busy (v, at) VALUES (UUID(), NOW(6))\" 2>/dev/null; done"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(3)  # the writer is going
            before = int(sql(b.cluster, b.ns, name, "SELECT COUNT(*) FROM busy").strip())
            b.cluster.apply(backup_object(b.ns, f"{name}-now", name))
            obj = wait_decided(b, f"{name}-now")
            after = int(sql(b.cluster, b.ns, name, "SELECT COUNT(*) FROM busy").strip())
        finally:
            writer.kill()
            writer.wait()
        status = obj["status"]
        assert status["state"] == "Complete", status
        assert verified(obj) == "True", oh.condition(obj, "Verified")
        assert status["file"] == f"{name}-now.sql" and status["size"] > 0 and status["database"] == DATABASE
        assert before <= status["rows"] <= after and after > before, (before, status["rows"], after)
        assert (oh.backup_dir(b.ns, name) / status["file"]).is_file()
        figures.add("backups verified")

    oh.for_each_server(one)
    listing = b.cluster.kubectl("-n", b.ns, "get", "mysqlbackups").stdout
    assert all(f"{s.name('bk')}-now" in listing for s in SERVERS), listing
    for path, words in (("mysqlbackup.spec", ("instance", "file")), ("mysql.spec.backup", ("schedule", "keep")),
                        ("mysql.spec.restore_from", ("latest", "none")), ("mysqlrestore", ("REPLACES",))):
        explained = b.cluster.kubectl("explain", "--api-version=otus.homework/v1", path).stdout  # not another group's
        assert all(word in explained for word in words), explained


def test_a_dump_that_meets_ddl_is_taken_again_in_the_same_backup(backups: Backups) -> None:
    """DDL during a dump: a table rebuilt after the dump's snapshot opened (ALTER TABLE ...
    ENGINE=InnoDB, from a second client, again and again) is refused to the dump or the
    figures query with ERROR 1412, "Table definition has changed, please retry transaction",
    or, when the rebuild holds the table's lock as the dump reads it, ERROR 1213 (deadlock).
    The backup Job takes the whole backup again (the rebuilding stops once it has said so),
    and the record is Complete and Verified; the Job's log names the refusal and the try.
    Whether a rebuild lands inside a dump is up to the two clients' timing: a backup that
    happened to miss every rebuild is Complete too, and another one is taken (three at most)."""
    b = backups

    def one(server: oh.Server) -> None:
        name = server.name("bk")
        sql(b.cluster, b.ns, name, oh.DDL_TABLES)
        met = oh.backup_meeting_ddl(b.cluster, b.ns, name, server_pod_name(b.cluster, b.ns, name), b.operator,
                                    password=PASSWORD, database=DATABASE)
        obj = wait_decided(b, met)
        status = obj["status"]
        assert status["state"] == "Complete", status
        assert verified(obj) == "True", oh.condition(obj, "Verified")
        log = b.cluster.job_logs(b.ns, f"{met}-dump")
        assert "try 1 of 3" in log, log
        assert any(refusal in log for refusal in ("Table definition has changed", "Deadlock found")), log
        figures.add("dumps taken again after DDL")

    oh.for_each_server(one)


def kill_a_scheduled_dump(b: Backups, name: str) -> None:
    """Give the instance a big table, kill its next scheduled dump mid-way, drop the table
    (later runs are quick again); what was seen goes to b.killed[name]."""
    try:
        sql(b.cluster, b.ns, name, "CREATE TABLE big (id INT AUTO_INCREMENT PRIMARY KEY, pad VARCHAR(200)); "
                                   "INSERT INTO big (pad) VALUES (REPEAT('x', 200)); "
                                   + "INSERT INTO big (pad) SELECT pad FROM big; " * 17)
        b.killed[name] = kill_dump_mid_way(b.ns, name)
        sql(b.cluster, b.ns, name, "DROP TABLE big")
    except BaseException as e:
        b.killed[name] = e


def kill_dump_mid_way(ns: str, name: str, timeout: float = 150) -> str:
    """Wait for a mysqldump against the instance whose partial file holds rows, then SIGKILL
    every process of its pod (the container dies, as on an OOM kill or a lost node)."""
    host = f"{name}.{ns}.svc.cluster.local"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid, argv in oh.processes():
            if not (argv and Path(argv[0]).name == "mysqldump" and oh.client_host(argv) == host
                    and "--help" not in argv):
                continue
            partials = [p for p in oh.backup_dir(ns, name).glob(".*.sql.partial") if p.stat().st_size > 1 << 18]
            if not partials:
                continue
            try:
                cgroup = Path(f"/proc/{pid}/cgroup").read_text()
            except OSError:
                continue
            seen = f"{partials[0].name} at {partials[0].stat().st_size} bytes"
            for other, _ in oh.processes():
                try:
                    if Path(f"/proc/{other}/cgroup").read_text() == cgroup:
                        os.kill(other, signal.SIGKILL)
                except OSError:
                    continue
            return seen
        time.sleep(0.02)
    raise AssertionError(f"no dump of {host} ran mid-way within {timeout:.0f}s")


def scheduled_runs(b: Backups, name: str) -> int:
    """How many times the instance's backup CronJob has started a run: the minutes from its
    creation to its last schedule time (it runs every minute)."""
    cronjob = b.cluster.get("-n", b.ns, "cronjobs", f"{name}-bk")
    last = cronjob.get("status", {}).get("lastScheduleTime")
    if not last:
        return 0
    created = cronjob["metadata"]["creationTimestamp"]

    def minutes(stamp: str) -> int:
        return int(time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) // 60)
    return minutes(last) - minutes(created)


@pytest.mark.skipif(not os.access(oh.HOSTPATH_BASE.parent, os.W_OK), reason="needs the local node's files")
def test_a_schedule_keeps_the_newest_two_and_survives_a_killed_run(backups: Backups) -> None:
    """`schedule: every minute, keep: 2`: one run is killed mid-dump (a big table makes it long
    enough): it leaves no file that looks complete, its record is Failed with a Warning Event
    on the instance, and the next run succeeds. After four or more runs exactly two complete
    backups remain, records and files, and the instance's status counts them."""
    b = backups

    def one(server: oh.Server) -> None:
        name = server.name("sched")
        b.kills[server.key].join()
        seen = b.killed[name]
        if isinstance(seen, BaseException):
            raise seen
        print(f"  {name}: scheduled dump killed with {seen}")

        def killed_run_failed_and_a_later_one_verified() -> bool:
            runs = sorted(records(b.cluster, b.ns, name), key=lambda r: r["metadata"]["name"])
            scheduled = [r for r in runs if r["spec"].get("job")]
            failed = [r for r in scheduled if r.get("status", {}).get("state") == "Failed"]
            if not failed:
                return False
            later = [r for r in scheduled if r["metadata"]["name"] > failed[-1]["metadata"]["name"]]
            return any(r.get("status", {}).get("state") == "Complete" and verified(r) == "True" for r in later)

        b.cluster.wait_for(killed_run_failed_and_a_later_one_verified, timeout=240,
                           what=f"the killed run of {name} to fail and a later one to be verified", interval=2)
        failed = [r for r in records(b.cluster, b.ns, name) if r.get("status", {}).get("state") == "Failed"]
        assert len(failed) == 1, [r["metadata"]["name"] for r in failed]
        failure = oh.condition(failed[0], "Failure") or {}
        assert failure.get("status") == "True" and failed[0]["spec"]["job"] in failure["message"], failure
        assert any(e["reason"] == "BackupFailed" for e in oh.warnings_about(b.cluster, b.ns, name))

        def run_of(file_name: str) -> int:
            """The run a file belongs to: its Job's schedule time (<name>-bk-<seconds>.sql...)."""
            return int(file_name.lstrip(".").split("-bk-")[1].split(".")[0])

        def settled_to_two() -> tuple[list[str], list[str]] | None:
            """The two good backups' files and the files on disk, once there are two and no
            other file but those of runs newer than both (under way, not recorded yet)."""
            good = sorted(r["status"]["file"] for r in records(b.cluster, b.ns, name)
                          if r.get("status", {}).get("state") == "Complete" and verified(r) == "True")
            if scheduled_runs(b, name) < 4 or len(good) != 2:
                return None
            newest = max(run_of(f) for f in good)
            settled = sorted(p.name for p in oh.backup_dir(b.ns, name).iterdir() if run_of(p.name) <= newest)
            return good, settled

        def pruned_to_two() -> bool:
            found = settled_to_two()
            return found is not None and found[1] == sorted([*found[0], *(f"{f}.figures" for f in found[0])])

        b.cluster.wait_for(pruned_to_two, timeout=180, what=f"{name} pruned to two backups", interval=2)
        assert scheduled_runs(b, name) >= 4

        def counted() -> bool:  # the records' changes run the instance's role (their owner annotations)
            status = b.cluster.get("-n", b.ns, "mysqls.otus.homework", name)["status"].get("backup", {})
            return bool(status.get("count") == 2 and status.get("nextScheduled")
                        and status.get("lastFailed") == failed[0]["metadata"]["name"])

        b.cluster.wait_for(counted, timeout=120, what=f"{name}'s status to count two backups", interval=2)
        # a pruned run is not recorded again (its Job goes with it): no record but the
        # killed run's is bad
        bad = [r["metadata"]["name"] for r in records(b.cluster, b.ns, name)
               if r["spec"].get("job") and (r.get("status", {}).get("state") == "Failed"
                                            or verified(r) == "False")]
        assert bad == [failed[0]["metadata"]["name"]], bad
        figures.add("scheduled dumps killed")

    try:
        oh.for_each_server(one)
    finally:
        # what the schedules were for is seen: the module's other tests run without a dump
        # and a verification every minute beside them
        for server in SERVERS:
            b.cluster.kubectl("-n", b.ns, "patch", "mysqls.otus.homework", server.name("sched"), "--type=merge",
                              "-p", json.dumps({"spec": {"backup": {"schedule": None}}}))


def latest_backup(b: Backups, name: str) -> str:
    claim = b.cluster.get("-n", b.ns, "pvc", f"{name}-backup")
    return str(claim["metadata"].get("annotations", {}).get("otus.homework/latest-backup", ""))


def test_a_backup_is_not_named_the_latest_over_a_claim_changed_since_its_run_read_it(backups: Backups) -> None:
    """A backup's run names it the latest on the backup volume claim with a patch that holds
    the claim's resourceVersion as the run read it: had the claim changed in between (the
    finalizer naming the backup it took at deletion), the older "newest" would overwrite it.
    Here another client changes the claim many times a second while the run settles: every
    attempt is refused, the marker stays, and the run fails with a Warning event naming the
    claim; once the claim is left alone the retried run names the backup."""
    b = backups
    name = SERVERS[0].name("bk")
    claim, before, backup = f"{name}-backup", latest_backup(b, name), f"{name}-contended"
    stop = threading.Event()
    ticks = [0]

    def tick() -> None:  # an annotation no run reads, changed every ~20 ms
        while not stop.is_set():
            ticks[0] += 1
            b.cluster.core.patch_namespaced_persistent_volume_claim(
                claim, b.ns, {"metadata": {"annotations": {"test.otus.homework/tick": str(ticks[0])}}})
            time.sleep(0.02)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        b.cluster.apply(backup_object(b.ns, backup, name, verify=False))  # the marker is the subject

        def refused() -> bool:
            assert ticker.is_alive(), "the client changing the claim stopped"
            assert latest_backup(b, name) == before, "the marker was written over a changed claim"
            return any(claim in e["message"] and "changed between" in e["message"]
                       for e in oh.warnings_about(b.cluster, b.ns, backup))

        b.cluster.wait_for(refused, timeout=600, what=f"the run of {backup} to be refused the marker", interval=1)
        assert latest_backup(b, name) == before
    finally:
        stop.set()
        ticker.join()
    b.cluster.kubectl("-n", b.ns, "annotate", "pvc", claim, "test.otus.homework/tick-")
    b.cluster.wait_for(lambda: latest_backup(b, name) == f"{backup}.sql", timeout=300,
                       what=f"{backup} to be named the latest once the claim is left alone", interval=1)
    b.cluster.wait_for(lambda: record(b.cluster, b.ns, backup).get("status", {}).get("state") == "Complete",
                       timeout=120, what=f"{backup}'s status, written after the marker", interval=1)
    assert verified(record(b.cluster, b.ns, backup)) == "Unknown"  # not asked for
    assert ticks[0] > 100, ticks


def test_a_re_created_instance_restores_the_backup_it_names(backups: Backups) -> None:
    """Rows written between two backups: the instance deleted (its backup taken and recorded
    as a MySQLBackup), then re-created with `restore_from: <the older>`, holds exactly the
    older rows. Before that, a restore_from naming a backup of another database is refused."""
    b = backups

    def one(server: oh.Server) -> None:
        name = server.name("bk")
        older_backup(b, name)
        sql(b.cluster, b.ns, name, "INSERT INTO marks VALUES (2, 'newer')")
        before = {r["metadata"]["name"] for r in records(b.cluster, b.ns, name)}
        b.cluster.kubectl("-n", b.ns, "delete", "mysqls.otus.homework", name, "--timeout=300s", timeout=320)
        taken = [r for r in records(b.cluster, b.ns, name) if r["metadata"]["name"] not in before]
        assert len(taken) == 1 and taken[0]["spec"]["file"].endswith(".sql"), taken
        at_deletion = wait_decided(b, taken[0]["metadata"]["name"])
        assert at_deletion["status"]["state"] == "Complete" and verified(at_deletion) == "True", at_deletion["status"]

        b.cluster.wait_for(lambda: b.cluster.kubectl("-n", b.ns, "get", "deploy,pvc", "-o", "name",
                                                     "-l", f"app.kubernetes.io/instance={name}").stdout.split()
                           == [f"persistentvolumeclaim/{name}-backup"], timeout=120,
                           what="the children to be collected")  # or the new object waits for them
        def refused(naming: str) -> bool:
            # (first, maybe, a Failure while the deleted object's children are collected)
            failure = oh.condition(b.cluster.get("-n", b.ns, "mysqls.otus.homework", name), "Failure") or {}
            message = failure.get("message", "")
            return failure.get("status") == "True" and "spec.restore_from" in message and naming in message

        # the latest backup (taken at deletion) holds otus-database, not the new spec.database
        b.cluster.apply(oh.mysql_object(name, b.ns, image=server.image, database="other-db", backup={"verify": True}))
        b.cluster.wait_for(lambda: refused("latest"), timeout=180, what="the refusal of latest", interval=1)
        message = (oh.condition(b.cluster.get("-n", b.ns, "mysqls.otus.homework", name), "Failure") or {})["message"]
        assert "'other-db'" in message and f"'{DATABASE}'" in message, message
        assert b.cluster.kubectl("-n", b.ns, "get", "pvc", f"{name}-data", check=False).returncode != 0

        b.cluster.apply(oh.mysql_object(name, b.ns, image=server.image, database="other-db",
                                        restore_from=f"{name}-older", backup={"verify": True}))
        b.cluster.wait_for(lambda: refused(f"{name}-older"), timeout=180, what="the restore_from refusal", interval=1)
        message = (oh.condition(b.cluster.get("-n", b.ns, "mysqls.otus.homework", name), "Failure") or {})["message"]
        assert "spec.restore_from" in message and "other-db" in message and f"{name}-older" in message, message
        assert b.cluster.kubectl("-n", b.ns, "get", "pvc", f"{name}-data", check=False).returncode != 0

        b.cluster.kubectl("-n", b.ns, "patch", "mysqls.otus.homework", name, "--type", "merge",
                          "-p", json.dumps({"spec": {"database": DATABASE}}))
        oh.wait_successful(b.cluster, b.ns, name, b.operator)
        oh.wait_ready(b.cluster, b.ns, name)
        assert sql(b.cluster, b.ns, name, "SELECT v FROM marks ORDER BY id").split() == ["older"]

    oh.for_each_server(one)

    # a backup that does not exist is refused too, before anything is created
    name = "nowhere"
    b.cluster.apply(oh.mysql_object(name, b.ns, image=kube.LOCAL_PAUSE_IMAGE, restore_from="no-such-backup"))

    def refused() -> bool:
        failure = oh.condition(b.cluster.get("-n", b.ns, "mysqls.otus.homework", name), "Failure") or {}
        return failure.get("status") == "True"

    b.cluster.wait_for(refused, timeout=120, what="the restore_from refusal", interval=1)
    message = (oh.condition(b.cluster.get("-n", b.ns, "mysqls.otus.homework", name), "Failure") or {})["message"]
    assert "spec.restore_from" in message and "'no-such-backup' does not exist" in message, message
    assert any("spec.restore_from" in m for m in oh.wait_warning(b.cluster, b.ns, name, lambda m: "spec.restore_from" in m))


def test_a_restore_replaces_a_running_instances_database(backups: Backups) -> None:
    """A MySQLRestore loads an older backup into the running instance: rows and tables written
    since are gone, its status says what was replaced, an Event said so when it started."""
    b = backups

    def one(server: oh.Server) -> None:
        name = server.name("bk")
        older_backup(b, name)
        sql(b.cluster, b.ns, name, "INSERT INTO marks VALUES (3, 'since'); CREATE TABLE since (x INT)")
        b.cluster.apply(json.dumps({"apiVersion": "otus.homework/v1", "kind": "MySQLRestore",
                                    "metadata": {"name": f"{name}-back", "namespace": b.ns},
                                    "spec": {"instance": name, "backup": f"{name}-older"}}))

        def done() -> bool:
            state = b.cluster.get("-n", b.ns, "mysqlrestores.otus.homework", f"{name}-back").get("status", {})
            return state.get("state") in ("Complete", "Failed")

        b.cluster.wait_for(done, timeout=300, what=f"MySQLRestore {name}-back to finish", interval=1)
        status = b.cluster.get("-n", b.ns, "mysqlrestores.otus.homework", f"{name}-back")["status"]
        assert status["state"] == "Complete" and status["file"] == f"{name}-older.sql", status
        assert "were replaced by backup" in status["message"] and status["completionTime"], status
        assert sql(b.cluster, b.ns, name, "SELECT v FROM marks ORDER BY id").split() == ["older"]
        assert "since" not in sql(b.cluster, b.ns, name, "SHOW TABLES").split()
        events = b.cluster.get("-n", b.ns, "events", "--field-selector", f"involvedObject.name={name}-back")["items"]
        assert any(e["reason"] == "ReplacingDatabase" for e in events), events

    oh.for_each_server(one)


@pytest.mark.skipif(not os.access(oh.HOSTPATH_BASE.parent, os.W_OK), reason="needs the local node's files")
def test_a_restore_whose_load_fails_puts_the_database_back_as_it_was(backups: Backups) -> None:
    """A backup whose load stops half-way (taken without verification, then its file on the
    node replaced by an earlier dump with a statement the server refuses between two of its
    tables, the trailer intact: a record naming a file of the test's own would be refused as
    no backup of the operator's): the MySQLRestore fails saying the safety copy was put back,
    and the database holds exactly what it held before, rows and tables."""
    b = backups

    def one(server: oh.Server) -> None:
        name = server.name("bk")
        directory = oh.backup_dir(b.ns, name)
        older_backup(b, name)
        sql(b.cluster, b.ns, name, "CREATE TABLE IF NOT EXISTS before_bad (x INT); INSERT INTO before_bad VALUES (7)")
        tables = ", ".join(f"`{t}`" for t in sql(b.cluster, b.ns, name, "SHOW TABLES").split())
        before = sql(b.cluster, b.ns, name, f"CHECKSUM TABLE {tables} EXTENDED")
        b.cluster.apply(backup_object(b.ns, f"{name}-breaks", name, verify=False))
        b.cluster.wait_for(lambda: record(b.cluster, b.ns, f"{name}-breaks").get("status", {}).get("state")
                           == "Complete", timeout=300, what=f"{name}-breaks to be taken")
        text = (directory / f"{name}-older.sql").read_bytes()  # (binary columns: not text)
        cut = text.index(b"CREATE TABLE")
        (directory / f"{name}-breaks.sql").write_bytes(text[:cut] + b"THIS IS NOT SQL;\n" + text[cut:])
        b.cluster.apply(json.dumps({"apiVersion": "otus.homework/v1", "kind": "MySQLRestore",
                                    "metadata": {"name": f"{name}-broken", "namespace": b.ns},
                                    "spec": {"instance": name, "backup": f"{name}-breaks"}}))

        def done() -> bool:
            state = b.cluster.get("-n", b.ns, "mysqlrestores.otus.homework", f"{name}-broken").get("status", {})
            return state.get("state") in ("Complete", "Failed")

        b.cluster.wait_for(done, timeout=420, what=f"MySQLRestore {name}-broken to finish", interval=1)
        status = b.cluster.get("-n", b.ns, "mysqlrestores.otus.homework", f"{name}-broken")["status"]
        assert status["state"] == "Failed", status
        assert "put back as it was before the restore" in status["jobMessage"], status
        assert ", ".join(f"`{t}`" for t in sql(b.cluster, b.ns, name, "SHOW TABLES").split()) == tables
        assert sql(b.cluster, b.ns, name, f"CHECKSUM TABLE {tables} EXTENDED") == before
        print(f">> {server.key}: a load that failed: {status['jobMessage'][:300]}")

    oh.for_each_server(one)


def test_a_backup_during_a_long_query_holds_writers_back_for_moments_only(backups: Backups) -> None:
    """A 30 s query runs on a table while a client writes a row every 0.1 s and a backup is
    taken: the backup's lock does not wait for the query, nor does it make the writer wait for
    it (FLUSH TABLES WITH READ LOCK would: every statement on the query's table waited for
    it). The backup is Complete and Verified; the writer's longest wait is printed."""
    b = backups

    def one(server: oh.Server) -> None:
        name = server.name("bk")
        sql(b.cluster, b.ns, name, "CREATE TABLE IF NOT EXISTS steady (id INT AUTO_INCREMENT PRIMARY KEY, "
                                   "at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))")
        pod = server_pod_name(b.cluster, b.ns, name)
        exec_ = [b.cluster.kubectl_bin, "--kubeconfig", b.cluster.kubeconfig, "-n", b.ns, "exec", pod, "--"]
        query = subprocess.Popen([*exec_, "mysql", "-uroot", f"-p{PASSWORD}", DATABASE, "-e",
                                  "SELECT SLEEP(30), COUNT(*) FROM steady"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        writer = subprocess.Popen([*exec_, "sh", "-c",
                                   "end=$(($(date +%s) + 40)); while [ \"$(date +%s)\" -lt \"$end\" ]; do "
                                   "s=$(date +%s%N); "
                                   f"mysql -uroot -p{PASSWORD} {DATABASE} -e 'INSERT INTO steady () VALUES ()' "
                                   "2>/dev/null && echo $(( ($(date +%s%N) - s) / 1000000 )); sleep 0.1; done"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            time.sleep(3)
            b.cluster.apply(backup_object(b.ns, f"{name}-long", name))
            obj = wait_decided(b, f"{name}-long")
            waits = [int(line) for line in (writer.communicate(timeout=120)[0] or "").split() if line.isdigit()]
        finally:
            for process in (writer, query):
                process.kill()
                process.wait()
        assert obj["status"]["state"] == "Complete" and verified(obj) == "True", obj["status"]
        assert len(waits) > 50, waits
        line = (f"backups {server.key}: a backup during a 30 s query; the writer's longest wait "
                f"{max(waits)} ms over {len(waits)} writes (median {sorted(waits)[len(waits) // 2]} ms)")
        print(f">> {line}")
        figures.measured(line)

    oh.for_each_server(one)


@pytest.mark.skipif(not os.access(oh.HOSTPATH_BASE.parent, os.W_OK), reason="needs the local node's files")
def test_a_verification_whose_server_goes_away_is_tried_again_not_taken_for_a_bad_backup(backups: Backups) -> None:
    """The throwaway server of a backup's verification is SIGKILLed while it loads the backup
    (a table of about 27 MB makes the load long enough to be caught): the verification could
    not run, which is not a verdict; the backup is kept, never Verified False, and verified
    again, this time to True."""
    b = backups

    def one(server: oh.Server) -> None:
        name = server.name("bk")
        sql(b.cluster, b.ns, name, "CREATE TABLE big (id INT AUTO_INCREMENT PRIMARY KEY, pad VARCHAR(200)); "
                                   "INSERT INTO big (pad) VALUES (REPEAT('x', 200)); "
                                   + "INSERT INTO big (pad) SELECT pad FROM big; " * 17)
        backup = f"{name}-killed"
        b.cluster.apply(backup_object(b.ns, backup, name))
        seen = kill_verifying_server(b.ns, name, f"{backup}.sql")
        print(f"  {name}: the verification's server killed with {seen}")
        obj = wait_decided(b, backup)
        assert obj["status"]["state"] == "Complete" and verified(obj) == "True", obj["status"]
        events = oh.warnings_about(b.cluster, b.ns, backup)
        assert any("did not run to its end" in e["message"] for e in events), events
        assert not [e for e in oh.warnings_about(b.cluster, b.ns, name) if e["reason"] == "BackupVerificationFailed"
                    and backup in e["message"]]
        sql(b.cluster, b.ns, name, "DROP TABLE big")

    oh.for_each_server(one)


def kill_verifying_server(ns: str, name: str, file: str, timeout: float = 300) -> str:
    """Wait for the verification's client to have read part of `file` (its standard input,
    on the backup volume), then SIGKILL the throwaway server in the same pod (cgroup)."""
    path = str(oh.backup_dir(ns, name) / file)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid, argv in oh.processes():
            if (not argv or Path(argv[0]).name not in ("mysql", "mariadb") or oh.client_host(argv) != "127.0.0.1"
                    or oh.runs_a_statement(argv)):
                continue
            try:
                target = os.readlink(f"/proc/{pid}/fd/0")
                info = Path(f"/proc/{pid}/fdinfo/0").read_text()
                cgroup = Path(f"/proc/{pid}/cgroup").read_text()
            except OSError:
                continue
            position = int(next(line.split()[1] for line in info.splitlines() if line.startswith("pos:")))
            if Path(target).name != file or not (1 << 20) < position < Path(path).stat().st_size - (1 << 20):
                continue
            for other, _ in oh.processes():
                try:
                    same = Path(f"/proc/{other}/cgroup").read_text() == cgroup
                    comm = Path(f"/proc/{other}/comm").read_text().strip()
                except OSError:
                    continue
                if same and comm in ("mysqld", "mariadbd"):
                    os.kill(other, signal.SIGKILL)
                    return f"{file} at {position} bytes"
        time.sleep(0.05)
    raise AssertionError(f"no verification of {file} was caught loading within {timeout:.0f}s")


@pytest.mark.skipif(not os.access(oh.HOSTPATH_BASE.parent, os.W_OK), reason="needs the local node's files")
def test_a_truncated_or_altered_backup_fails_verification(backups: Backups) -> None:
    """Copies of a verified backup, one cut in half and one with a single value changed (its
    trailer intact), recorded as MySQLBackups (stated_record): both fail verification, the
    condition and a Warning Event on the instance naming the file (and the table that
    differs)."""
    b = backups

    def one(server: oh.Server) -> None:
        name = server.name("bk")
        directory = oh.backup_dir(b.ns, name)
        source = directory / f"{older_backup(b, name)}.sql"
        text = source.read_bytes()
        (directory / "cut.sql").write_bytes(text[: len(text) // 2])
        assert b"'older'" in text
        (directory / "altered.sql").write_bytes(text.replace(b"'older'", b"'olden'"))
        for copy in ("cut.sql", "altered.sql"):
            (directory / f"{copy}.figures").write_bytes((directory / f"{source.name}.figures").read_bytes())
            stated_record(b, f"{name}-{copy[:-4]}", name, copy, server.image)
        cut = wait_decided(b, f"{name}-cut")
        altered = wait_decided(b, f"{name}-altered")
        assert verified(cut) == "False" and "cut.sql" in (oh.condition(cut, "Verified") or {})["message"], cut["status"]
        assert "truncated" in (oh.condition(cut, "Verified") or {})["message"]
        message = (oh.condition(altered, "Verified") or {})["message"]
        assert verified(altered) == "False" and "altered.sql" in message and "table `marks` differs" in message, message
        for obj in (cut, altered):
            failure = oh.condition(obj, "Failure") or {}
            assert failure.get("status") == "True" and obj["spec"]["file"] in failure["message"], failure
        warnings = [e for e in oh.warnings_about(b.cluster, b.ns, name) if e["reason"] == "BackupVerificationFailed"]
        assert {w for e in warnings for w in ("cut.sql", "altered.sql") if w in e["message"]} == \
            {"cut.sql", "altered.sql"}, warnings
        figures.add("bad backups caught", 2)

    oh.for_each_server(one)


def test_no_secret_appears_outside_its_secrets(backups: Backups) -> None:
    """Last in the module: the backup and restore roles read the instances (whose spec holds
    the password); no Secret value of the namespace appears in the operator's log, its runner
    artifacts, the Events, the objects' status or any pod, Deployment or Job spec."""
    assert len(oh.secret_values(backups.cluster, backups.ns)) > 0, "nothing to look for"
    assert oh.leaks(backups.cluster, backups.ns, backups.operator) == []


def test_every_pod_of_the_instances_was_admitted_at_pod_security_restricted(backups: Backups) -> None:
    """The module's namespace enforces Pod Security "restricted". By now each server image's
    instances were created, backed up on demand and on schedule, verified, pruned, deleted
    (a backup Job), re-created (a restore Job) and restored into while running; here their
    passwords are rotated too (a rotation Job). Every pod all of that needed was admitted:
    no controller was refused a pod and no Pod Security warning was given, to the operator
    or in an event."""
    b = backups
    labels = b.cluster.get("namespace", b.ns)["metadata"]["labels"]
    assert labels.get("pod-security.kubernetes.io/enforce") == "restricted", labels

    def one(server: oh.Server) -> None:
        name = server.name("bk")
        b.cluster.kubectl("-n", b.ns, "patch", "mysqls.otus.homework", name, "--type=merge",
                          "-p", json.dumps({"spec": {"password": "rotated-pw-2"}}))
        oh.wait_successful(b.cluster, b.ns, name, b.operator)
        oh.wait_ready(b.cluster, b.ns, name)
        host = f"{name}.{b.ns}.svc.cluster.local"
        out = oh.sql_job(b.cluster, b.ns, host, DATABASE, "SELECT CURRENT_USER();", secret=f"{name}-credentials",
                         image=server.image, wait_for_server=True)
        assert out.strip().startswith("root@"), out

    oh.for_each_server(one)
    jobs = {j["metadata"].get("labels", {}).get("otus.homework/job", "")
            for j in b.cluster.get("-n", b.ns, "jobs")["items"]}
    print(f"jobs seen at the end, by what they do: {sorted(jobs)}")
    assert oh.admission_refusals(b.cluster, b.ns) == []
    assert oh.pod_security_warnings(b.operator) == []
