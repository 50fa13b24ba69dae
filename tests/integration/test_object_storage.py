"""Backups in an S3-compatible bucket (spec.backup.s3), on both server images, against the
local cluster's real object store (SeaweedFS, `cluster/cluster.sh object-store`): scheduled
and on-demand backups shipped compressed and encrypted, verified, and read back from the
bucket by a client of the test's own; a MySQLRestore of a backup named by its record; a
restore to a point in time from the archived binary logs (spec.backup.pointInTime), one
refused over a gap in them and one refused because the archive does not reach the time yet;
the loss of the node (the instance deleted, its volumes and their directories removed)
followed by a new instance in another namespace that restores every row from the bucket;
backups that cannot reach the bucket (wrong credentials, an unreachable endpoint, a bucket
that does not exist) failing with the target named; and a restore without the key refused.

One operator watches both namespaces of the module. Each image has two instances: `s3-<image>`
backs up to the bucket on a schedule, `pitr-<image>` archives its binary logs; the tests run
in file order, each on what the ones before it left (the node-loss test deletes `s3-<image>`,
so it comes after every test that needs it running). The store's credentials are copied into
the module's namespaces as a Secret; the age identity is made here (random bytes, bech32).
The test's own bucket client is one pod of the backup-tools image (TOOLS_POD), reached with
`kubectl exec`.
Each image's figures line (`bucket <image>: ...`) gives the on-demand backup's size, its bytes
in the bucket and its time (dump, ship, read back), and the restore Job's time after the loss
of the node (fetch and load); `OBJECT_STORAGE_ROWS` adds a table of that many rows (about
200 bytes each) before that backup, which the bench's `bucket` scenario sets.
"""

from __future__ import annotations

import base64
import datetime
import itertools
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import figures, harness, kube
from tests.integration import operator_harness as oh
from tests.integration.bucket import (
    BUCKET,
    ENDPOINT,
    MISSING_BUCKET,
    STORE_NAMESPACE,
    TOOLS_IMAGE,
    TOOLS_POD,
    UNREACHABLE_ENDPOINT,
    age_identity,
    bucket_env,
    s3_backup,
    secret,
)

SERVERS = oh.SERVERS
PASSWORD = "otuspassword"
DATABASE = "otus-database"
REPO = Path(__file__).resolve().parents[2]
BULK_ROWS = int(os.environ.get("OBJECT_STORAGE_ROWS", "0"))
# the archiving instance's archiveSeconds, and how long its steady write load runs (the RPO
# figure); the bench's bucket scenario sets both
ARCHIVE_SECONDS = int(os.environ.get("PITR_ARCHIVE_SECONDS", "5"))
LOAD_SECONDS = int(os.environ.get("PITR_LOAD_SECONDS", "15"))
# per image: the on-demand backup's figures (the scheduled test), completed by the restore's
# (the node-loss test)
MEASURED: dict[str, dict[str, float]] = {}

@dataclass
class Store:
    cluster: harness.Cluster
    ns: str  # where the instances back up from
    dr_ns: str  # where an instance restores after the loss of the node
    operator: harness.Operator


@pytest.fixture(scope="module")
def store(cluster: harness.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    if not cluster.local:
        pytest.skip("the object store is the local cluster's (cluster/cluster.sh object-store)")
    print(">> the local cluster's object store (SeaweedFS)", flush=True)
    subprocess.run([str(REPO / "cluster" / "cluster.sh"), "object-store"], check=True, stdout=subprocess.DEVNULL)
    found = cluster.get("-n", STORE_NAMESPACE, "secret", "seaweedfs-s3")["data"]
    credentials = {key: base64.b64decode(value).decode() for key, value in found.items()}
    identity = age_identity()
    with oh.module_namespace(cluster, "objects") as ns, oh.module_namespace(cluster, "objects-dr") as dr_ns, \
            oh.operator_in(cluster, f"{ns},{dr_ns}", tmp_path_factory.mktemp("objects-operator")) as operator:
        for where in (ns, dr_ns):
            cluster.apply(secret(where, "s3-creds", credentials))
            cluster.apply(secret(where, "backup-key", {"identity": identity}))
            cluster.apply(secret(where, "s3-wrong", {"AWS_ACCESS_KEY_ID": credentials["AWS_ACCESS_KEY_ID"],
                                                     "AWS_SECRET_ACCESS_KEY": "not-" + credentials["AWS_SECRET_ACCESS_KEY"]}))
        # the bucket client: idle until a test execs a script in it; TERM ends it at once
        cluster.apply(kube.shell_pod(ns, TOOLS_POD, "trap 'exit 0' TERM; while :; do sleep 2; done",
                                     env=bucket_env(), image=TOOLS_IMAGE))
        for server in SERVERS:
            cluster.apply(oh.mysql_object(server.name("s3"), ns, image=server.image,
                                          backup={**s3_backup(ns), "schedule": "* * * * *", "keep": 2}))
            cluster.apply(oh.mysql_object(server.name("pitr"), ns, image=server.image,
                                          backup={**s3_backup(ns), "pointInTime": {
                                              "enabled": True, "archiveSeconds": ARCHIVE_SECONDS}}))
        try:
            cluster.kubectl("-n", ns, "wait", "--for=condition=Ready", f"pod/{TOOLS_POD}", "--timeout=180s",
                            timeout=200)
            for server in SERVERS:
                for name in (server.name("s3"), server.name("pitr")):
                    oh.wait_successful(cluster, ns, name, operator)
                    oh.wait_ready(cluster, ns, name)
            yield Store(cluster, ns, dr_ns, operator)
        except BaseException:
            print(oh.diagnostics(cluster, ns, operator))
            print(oh.diagnostics(cluster, dr_ns, None))
            raise


# --- helpers ---------------------------------------------------------------------------------

def server_pod(cluster: harness.Cluster, ns: str, name: str) -> str:
    pods = [p for p in cluster.get("-n", ns, "pods", "-l", f"app={name}")["items"]
            if not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") == "Running"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return str(pods[0]["metadata"]["name"])


def sql(cluster: harness.Cluster, ns: str, name: str, statement: str) -> str:
    """SQL in the server's pod as the seed walkthrough runs it (kubectl exec, mysql -p)."""
    return cluster.kubectl("-n", ns, "exec", server_pod(cluster, ns, name), "-c", "mysql", "--", "mysql", "-uroot",
                           f"-p{PASSWORD}", "-N", "-B", DATABASE, "-e", statement, timeout=300).stdout


record = oh.backup_record
records = oh.backup_records
verified = oh.backup_verified


def take_backup(s: Store, ns: str, backup: str, instance: str) -> None:
    """An on-demand backup `backup` of `instance` in `ns` (a MySQLBackup record)."""
    s.cluster.apply(json.dumps({"apiVersion": "otus.homework/v1", "kind": "MySQLBackup",
                                "metadata": {"name": backup, "namespace": ns}, "spec": {"instance": instance}}))


def wait_decided(s: Store, name: str, timeout: float = 600) -> dict[str, Any]:
    """Wait until the record's dump is Complete or Failed and its verification decided."""
    return oh.wait_backup_decided(s.cluster, s.ns, name, s.operator, timeout)


def bucket_client(s: Store, script: str) -> str:
    """Run `script` in the bucket client's pod (the backup-tools image, bucket_env: the
    store's credentials for rclone's :s3: remote, the age identity in $AGE_IDENTITY); its
    output. The bucket is the same from both namespaces: the DR namespace's objects are read
    here too."""
    return s.cluster.kubectl("-n", s.ns, "exec", TOOLS_POD, "--", "sh", "-c", "set -eu\numask 077\n" + script,
                             timeout=300).stdout


def bucket_listing(s: Store, prefix: str) -> list[str]:
    out = bucket_client(s, f'rclone --config "" -q lsf -R ":s3:{BUCKET}/{prefix}"')
    return sorted(line.strip() for line in out.splitlines() if line.strip())


def restore_record(s: Store, name: str, spec: dict[str, str]) -> dict[str, Any]:
    """Create the MySQLRestore `name` of `spec` in Store.ns; its status once Complete or Failed."""
    s.cluster.apply(json.dumps({"apiVersion": "otus.homework/v1", "kind": "MySQLRestore",
                                "metadata": {"name": name, "namespace": s.ns}, "spec": spec}))
    s.cluster.wait_for(lambda: s.cluster.get("-n", s.ns, "mysqlrestores.otus.homework", name).get(
        "status", {}).get("state") in ("Complete", "Failed"), timeout=420, what=f"MySQLRestore {name} to finish")
    return dict(s.cluster.get("-n", s.ns, "mysqlrestores.otus.homework", name))


def size(count: float) -> str:
    """Bytes in MB, or in kB below 0.1 MB (the suite's database is a few kB)."""
    return f"{count / 1e6:.1f} MB" if count >= 1e5 else f"{count / 1e3:.1f} kB"


def seconds(start: str, end: str) -> float:
    def parse(text: str) -> datetime.datetime:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (parse(end) - parse(start)).total_seconds()


def fill_bulk(s: Store, name: str, rows: int) -> None:
    """A table `bulk` of `rows` rows of about 200 bytes (doubling from one row)."""
    sql(s.cluster, s.ns, name, "CREATE TABLE bulk (id BIGINT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(200)); "
                               "INSERT INTO bulk (v) VALUES (REPEAT(SHA2(RAND(), 256), 3));")
    count = 1
    while count < rows:
        sql(s.cluster, s.ns, name, "INSERT INTO bulk (v) SELECT REPEAT(SHA2(RAND(), 256), 3) FROM bulk "
                                   f"LIMIT {min(count, rows - count)};")
        count += min(count, rows - count)


def utc(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T")).replace(
        tzinfo=datetime.UTC)


_ARCHIVED = re.compile(r"^(\S+) objects: archived (\S+) to \S+-([0-9]+)[.]zst")


def archive_lag_under_load(s: Store, server: oh.Server) -> None:
    """The RPO figure: a client in the server's pod inserts a row every 0.1 s for
    LOAD_SECONDS; the archiving sidecar's log (with kubelet's timestamps) says when each log
    closed (in its object's name) and when it was shipped. Until log k+1 is shipped, what
    was written after log k closed is on the server only: the archive trails the server by
    shipped(k+1) - closed(k) at worst."""
    name = server.name("pitr")
    pod = server_pod(s.cluster, s.ns, name)
    sql(s.cluster, s.ns, name, "CREATE TABLE steady (id INT AUTO_INCREMENT PRIMARY KEY, at TIMESTAMP(3))")
    begun = time.time()
    out = s.cluster.kubectl("-n", s.ns, "exec", pod, "-c", "mysql", "--", "sh", "-c", f"""
        n=0 end=$(( $(date +%s) + {LOAD_SECONDS} ))
        while [ "$(date +%s)" -lt "$end" ]; do
          mysql -uroot -p"$(cat /etc/mysql-operator/credentials/password)" '{DATABASE}' \
            -e 'INSERT INTO steady (at) VALUES (NOW(3))' 2>/dev/null && n=$((n + 1))
          sleep 0.1
        done
        echo "rows=$n"
    """, timeout=LOAD_SECONDS + 120).stdout
    rows = int(out.split("rows=")[-1].split()[0])
    time.sleep(2 * ARCHIVE_SECONDS + 10)  # the last logs of the load closed and shipped
    log = s.cluster.kubectl("-n", s.ns, "logs", pod, "-c", "binlog-archive", "--timestamps").stdout
    shipped = []  # (closed, shipped) of the logs closed during the load
    for line in log.splitlines():
        found = _ARCHIVED.match(line)
        if found and int(found[3]) >= begun:
            shipped.append((int(found[3]), utc(found[1][:19] + "Z").timestamp()))
    assert len(shipped) >= 2, log[-2000:]
    worst = max(later[1] - earlier[0] for earlier, later in itertools.pairwise(shipped))
    upload = sorted(done - closed for closed, done in shipped)[len(shipped) // 2]
    line = (f"bucket {server.key} pitr: a steady write load ({rows / LOAD_SECONDS:.1f} rows/s for "
            f"{LOAD_SECONDS} s, archiveSeconds {ARCHIVE_SECONDS}): the archive trails the server by "
            f"{worst:.0f} s at worst ({len(shipped)} logs; closed to shipped: {upload:.0f} s median)")
    print(f">> {line}")
    figures.measured(line)


def refused_over_a_gap(s: Store, server: oh.Server, prefix: str, log: str, at: str) -> None:
    """Remove the archived binary log `log` from the bucket; a restore to `at` is refused
    with a Failure condition and a Warning that name the missing log."""
    removed = bucket_client(s, f"""
        for object in $(rclone --config "" -q lsf -R ":s3:{BUCKET}/{prefix}/binlogs" | grep '/{log}-'); do
          rclone --config "" -q deletefile ":s3:{BUCKET}/{prefix}/binlogs/$object"
          echo "removed=$object"
        done
    """)
    assert "removed=" in removed, removed
    gap = server.name("gap")
    s.cluster.apply(oh.mysql_object(gap, s.dr_ns, image=server.image, restore_from=at,
                                    backup=s3_backup(s.dr_ns, prefix=prefix)))

    def refused() -> bool:
        got = s.cluster.get("-n", s.dr_ns, "mysqls.otus.homework", gap)
        return "gap in the binary logs" in str((oh.condition(got, "Failure") or {}).get("message", ""))
    s.cluster.wait_for(refused, timeout=420, what=f"the restore of {gap} over a gap to be refused")
    got = s.cluster.get("-n", s.dr_ns, "mysqls.otus.homework", gap)
    message = str((oh.condition(got, "Failure") or {}).get("message"))
    assert f"{log} is missing" in message, message
    warnings = oh.wait_warning(s.cluster, s.dr_ns, gap, lambda m: "gap in the binary logs" in m)
    assert warnings, warnings
    print(f">> {server.key}: a gap: {message[:300]}")


def gap_reported(s: Store, name: str, log: str) -> None:
    """The next backup of `name` finds the archive without `log`: the instance's Archived
    condition is False (ArchiveGap) naming it, and a Warning Event says so."""
    backup = f"{name}-after-gap"
    take_backup(s, s.ns, backup, name)
    status = wait_decided(s, backup)["status"]
    assert status["state"] == "Complete", status
    sequence = log.rsplit(".", 1)[-1]
    assert status["binlog"]["gap"] == sequence, status

    def condition() -> dict[str, Any]:
        return oh.condition(s.cluster.get("-n", s.ns, "mysqls.otus.homework", name), "Archived") or {}
    s.cluster.wait_for(lambda: condition().get("reason") == "ArchiveGap", timeout=180,
                       what=f"{name}'s Archived condition to report the gap")
    assert condition()["status"] == "False" and f"lack {sequence}" in condition()["message"], condition()
    warnings = oh.wait_warning(s.cluster, s.ns, name, lambda m: f"lack {sequence}" in m)
    assert any(f"lack {sequence}" in m for m in warnings), warnings


def misdirected_backup(s: Store, label: str, credentials: str = "s3-creds", **target: str) -> dict[str, Any]:
    """The failing-target tests' instance `wrong-<image>` of SERVERS[0] in Store.dr_ns, one
    server for all of them: created, or updated, with spec.backup.s3 of `credentials` and
    `target` (s3_backup's extra fields), Successful at that spec and Ready; then its
    on-demand backup `<instance>-<label>`, once Failed (the record)."""
    server = SERVERS[0]
    name = server.name("wrong")
    s.cluster.apply(oh.mysql_object(name, s.dr_ns, image=server.image,
                                    backup=s3_backup(s.dr_ns, credentials, **target)))
    oh.wait_successful(s.cluster, s.dr_ns, name, s.operator)
    oh.wait_ready(s.cluster, s.dr_ns, name)
    backup = f"{name}-{label}"
    take_backup(s, s.dr_ns, backup, name)

    def failed() -> bool:
        state = record(s.cluster, s.dr_ns, backup).get("status", {}).get("state")
        assert state != "Complete", f"{backup} is Complete"
        return bool(state == "Failed")
    s.cluster.wait_for(failed, timeout=420, what=f"the backup {backup} to fail")
    return record(s.cluster, s.dr_ns, backup)


def failed_naming(s: Store, backup: str, said: str) -> None:
    """The Failed record `backup` in Store.dr_ns has a Failure condition, and a Warning Event,
    that say `said`."""
    def failure() -> str:
        return str((oh.condition(record(s.cluster, s.dr_ns, backup), "Failure") or {}).get("message", ""))
    s.cluster.wait_for(lambda: said in failure(), timeout=60, what=f"the Failure condition of {backup} to say {said!r}")
    warnings = oh.wait_warning(s.cluster, s.dr_ns, backup, lambda m: said in m)
    assert any(said in m for m in warnings), warnings


# --- tests -----------------------------------------------------------------------------------

def test_scheduled_and_on_demand_backups_reach_the_bucket_encrypted_and_verified(store: Store) -> None:
    """Scheduled backups (every minute, keep 2) and an on-demand one are Complete and
    Verified with their objects in the bucket; once the schedule is removed, the bucket
    holds exactly the objects of the records retention kept, before and after the on-demand
    backup (pruned records' objects are removed there too). A client of the test's own cannot
    read an object without the key (an age file, not zstd) and reads the rows back with it."""
    s = store

    def one(server: oh.Server) -> None:
        name = server.name("s3")
        prefix = f"{s.ns}/{name}"
        sql(s.cluster, s.ns, name, "CREATE TABLE kept (id INT PRIMARY KEY, v VARCHAR(40)); "
                                   "INSERT INTO kept VALUES (1, 'one'), (2, 'two'), (3, 'three');")

        def scheduled_verified() -> int:
            return sum(1 for r in records(s.cluster, s.ns, name) if r["spec"].get("job")
                       and r.get("status", {}).get("state") == "Complete" and verified(r) == "True")
        s.cluster.wait_for(lambda: scheduled_verified() >= 2, timeout=480,
                           what=f"two verified scheduled backups of {name}")
        s.cluster.kubectl("-n", s.ns, "patch", "mysqls.otus.homework", name, "--type=merge",
                          "-p", '{"spec":{"backup":{"schedule":null}}}')

        def settled() -> bool:
            jobs = s.cluster.kubectl("-n", s.ns, "get", "cronjob", f"{name}-bk", check=False)
            return jobs.returncode != 0 and all(
                r.get("status", {}).get("state") in ("Complete", "Failed") and verified(r) in ("True", "False")
                for r in records(s.cluster, s.ns, name))
        s.cluster.wait_for(settled, timeout=300, what=f"{name}'s schedule gone and its backups decided")

        def bucket_matches_records(keep: int) -> bool:
            complete = sorted(r["status"]["file"] for r in records(s.cluster, s.ns, name)
                              if r.get("status", {}).get("state") == "Complete")
            found = bucket_listing(s, prefix)
            wanted = sorted(f"{f}{suffix}" for f in complete for suffix in (".figures.zst.age", ".zst.age"))
            print(f">> {server.key}: {len(complete)} complete records, bucket: {found}")
            return len(complete) <= keep and found == wanted
        s.cluster.wait_for(lambda: bucket_matches_records(2), timeout=240, interval=2,
                           what=f"the bucket to hold exactly the objects of {name}'s kept backups")

        if BULK_ROWS:
            fill_bulk(s, name, BULK_ROWS)
        take_backup(s, s.ns, f"{name}-now", name)
        done = wait_decided(s, f"{name}-now")
        status = done["status"]
        assert status["state"] == "Complete", status
        assert verified(done) == "True", status
        assert status["object"] == f"s3://{BUCKET}/{prefix}/{name}-now.sql.zst.age", status
        assert int(status["stored"]) > 0, status
        MEASURED[server.key] = {"size": int(status["size"]), "stored": int(status["stored"]),
                                "backup_s": seconds(status["startTime"], status["completionTime"])}
        s.cluster.wait_for(lambda: bucket_matches_records(2), timeout=240, interval=2,
                           what=f"the oldest of {name}'s backups to be pruned from the bucket too")

        out = bucket_client(s, f"""
            obj=":s3:{BUCKET}/{prefix}/{name}-now.sql.zst.age"
            identity=$(mktemp)
            printf '%s\\n' "$AGE_IDENTITY" > "$identity"
            echo "header=$(rclone --config "" -q cat --head 21 "$obj")"
            if rclone --config "" -q cat "$obj" | zstd -q -d -c > /dev/null 2>&1; then echo plain=readable; else echo plain=unreadable; fi
            echo "rows=$(rclone --config "" -q cat "$obj" | age -d -i "$identity" | zstd -q -d -c | grep -c "(3,'three')")"
            rm -f "$identity"
        """)
        assert "header=age-encryption.org/v1" in out, out
        assert "plain=unreadable" in out, out
        assert "rows=1" in out, out

    oh.for_each_server(one)


def test_a_restore_of_a_backup_named_by_its_record_loads_it_from_the_bucket(store: Store) -> None:
    """A MySQLRestore naming the on-demand backup of the scheduled test (spec.backup) replaces
    the running instance's database with that backup, fetched from the bucket by the load
    Job: a row changed, a row added and a table created after the backup are gone, its rows
    are back."""
    s = store

    def one(server: oh.Server) -> None:
        name = server.name("s3")
        backup = record(s.cluster, s.ns, f"{name}-now")["status"]
        sql(s.cluster, s.ns, name, "UPDATE kept SET v = 'uno' WHERE id = 1; INSERT INTO kept VALUES (4, 'four'); "
                                   "CREATE TABLE later (id INT PRIMARY KEY);")
        done = restore_record(s, f"{name}-back", {"instance": name, "backup": f"{name}-now"})["status"]
        assert done["state"] == "Complete", done
        assert done["file"] == backup["file"], (done, backup)
        rows = sql(s.cluster, s.ns, name, "SELECT GROUP_CONCAT(v ORDER BY id) FROM kept; SHOW TABLES LIKE 'later';")
        assert rows.split() == ["one,two,three"], rows
        # the file came from the bucket: the load Job's first container fetched it
        pod = s.cluster.get("-n", s.ns, "job", f"{name}-back-load")["spec"]["template"]["spec"]
        fetch = {e["name"]: e.get("value") for c in pod.get("initContainers", []) for e in c["env"]}
        assert fetch.get("MODE") == "fetch" and fetch.get("BACKUP_FILE") == backup["file"], fetch
        assert fetch.get("S3_PREFIX") == f"{s.ns}/{name}", fetch

    oh.for_each_server(one)


def test_a_streamed_dump_that_meets_ddl_is_taken_again_and_only_the_good_try_is_named(store: Store) -> None:
    """A table rebuilt again and again (ALTER TABLE ... ENGINE=InnoDB from a second client)
    during a backup to the bucket: the dump container gives up the try that met it (its
    stream is dropped by the objects container) and takes the whole backup again; the record
    is Complete and Verified (the verification fetches the copy in the bucket), the bucket
    holds the named object and no partial one, and the backup volume holds no dump: the dump
    was streamed. One image (SERVERS[0]): the hand-over between the two containers is the
    same for both; test_backups takes DDL during a dump on both images to the volume."""
    s = store
    server = SERVERS[0]
    name = server.name("s3")
    sql(s.cluster, s.ns, name, oh.DDL_TABLES)
    met = oh.backup_meeting_ddl(s.cluster, s.ns, name, server_pod(s.cluster, s.ns, name), s.operator,
                                password=PASSWORD, database=DATABASE)
    done = wait_decided(s, met)
    status = done["status"]
    assert status["state"] == "Complete", status
    assert verified(done) == "True", oh.condition(done, "Verified")
    assert int(status["size"]) > 13_000_000, status
    shipped = s.cluster.kubectl("-n", s.ns, "logs", f"job/{met}-dump", "-c", "objects", check=False).stdout
    assert "is taken again; its stream is dropped" in shipped, shipped
    found = bucket_listing(s, f"{s.ns}/{name}")
    assert f"{met}.sql.zst.age" in found and not [f for f in found if f.endswith(".partial")], found
    if os.access(oh.HOSTPATH_BASE.parent, os.R_OK):
        assert not list(oh.backup_dir(s.ns, name).glob(f"*{met}*")), "a dump on the backup volume"
    figures.add("dumps taken again after DDL")


def test_a_restore_to_a_time_the_archive_has_not_reached_is_refused_before_the_database_is_touched(
        store: Store) -> None:
    """A MySQLRestore to an hour from now (spec.pointInTime) on the archiving instance, which
    has a backup with its binary-log position, is Failed: its Failure condition, its status
    and a Warning Event on the instance say how far the archive of binary logs reaches and
    that it is not that time; the database's rows are those of before. One image
    (SERVERS[0]): the refusal is the fetch's (objects.sh), before the server image is used.
    It runs before the point-in-time test, whose gap and write load would stand in its way."""
    s = store
    server = SERVERS[0]
    name = server.name("pitr")
    sql(s.cluster, s.ns, name, "CREATE TABLE kept (id INT PRIMARY KEY, v VARCHAR(40)); "
                               "INSERT INTO kept VALUES (1, 'one'), (2, 'two');")
    take_backup(s, s.ns, f"{name}-first", name)
    first = wait_decided(s, f"{name}-first")["status"]
    assert first["state"] == "Complete" and first["binlog"]["position"], first
    sql(s.cluster, s.ns, name, "INSERT INTO kept VALUES (3, 'three');")
    before = sql(s.cluster, s.ns, name, "SELECT GROUP_CONCAT(v ORDER BY id) FROM kept;")
    assert before.strip() == "one,two,three", before
    future = (harness.now_utc() + datetime.timedelta(hours=1)).replace(microsecond=0)
    restore = f"{name}-future"
    done = restore_record(s, restore, {"instance": name, "pointInTime": f"{future:%Y-%m-%dT%H:%M:%SZ}"})
    status = done["status"]
    assert status["state"] == "Failed", status
    found = re.search(rf"the binary logs archived in s3://{BUCKET}/{s.ns}/{name}/binlogs/\S+ "
                      r"reach (\S+), not (\S+) ", status["jobMessage"])
    assert found, status
    # every event before the second after the one asked for is wanted (objects.sh)
    assert utc(found[1]) < future <= utc(found[2]) <= future + datetime.timedelta(seconds=1), found.group(0)

    def failure() -> str:
        got = s.cluster.get("-n", s.ns, "mysqlrestores.otus.homework", restore)
        return str((oh.condition(got, "Failure") or {}).get("message", ""))
    s.cluster.wait_for(lambda: found.group(0) in failure(), timeout=60,
                       what=f"the Failure condition of {restore} to say how far the archive reaches")
    warnings = oh.wait_warning(s.cluster, s.ns, name, lambda m: restore in m and found.group(0) in m)
    assert any(restore in m and found.group(0) in m for m in warnings), warnings
    assert sql(s.cluster, s.ns, name, "SELECT GROUP_CONCAT(v ORDER BY id) FROM kept;") == before
    print(f">> a time not reached yet: {status['jobMessage'][:300]}")


def test_a_restore_to_a_point_in_time_replays_the_archived_binary_logs_and_a_gap_is_refused(
        store: Store) -> None:
    """Point-in-time recovery: rows written at t1, t2 and t3 after a backup, then a table
    dropped by mistake at t4. A new instance in another namespace restoring to a second
    between t3 and t4 has the table and every row up to t3 (the backup, then the archived
    binary logs replayed), and a MySQLRestore to that second brings the table back into the
    running instance. A backup taken afterwards reports how far the archive reaches, and so
    does the instance. Once a log the restore needs is removed from the bucket, a restore to
    the same time is refused: a Failure condition and a Warning name the gap."""
    s = store

    def one(server: oh.Server) -> None:
        name = server.name("pitr")
        prefix = f"{s.ns}/{name}"
        s.cluster.wait_for(lambda: sql(s.cluster, s.ns, name, "SELECT COUNT(*) FROM mysql_operator.binlog_archive")
                           .strip() == "1", timeout=120, what=f"{name}'s binary logs to have an archive identity")
        sql(s.cluster, s.ns, name, "CREATE TABLE events (id INT PRIMARY KEY, at VARCHAR(8)); "
                                   "INSERT INTO events VALUES (0, 'base');")
        take_backup(s, s.ns, f"{name}-base", name)
        base = wait_decided(s, f"{name}-base")["status"]
        assert base["state"] == "Complete", base
        assert base["binlog"]["position"].startswith("mysql-bin."), base
        for i, label in ((1, "t1"), (2, "t2"), (3, "t3")):
            sql(s.cluster, s.ns, name, f"INSERT INTO events VALUES ({i}, '{label}');")
            time.sleep(1.5)
        point = sql(s.cluster, s.ns, name, "SELECT UTC_TIMESTAMP();").strip()  # after t3, before t4
        time.sleep(2.5)
        sql(s.cluster, s.ns, name, "DROP TABLE events;")  # t4: the mistake
        dropped = utc(sql(s.cluster, s.ns, name, "SELECT UTC_TIMESTAMP();").strip())
        at = utc(point).strftime("%Y-%m-%dT%H:%M:%SZ")

        # a backup after the mistake says how far the archive reaches (the logs of t1..t4
        # closed and shipped within a few archiveSeconds)
        def archived_past_the_drop() -> bool:
            index = len(records(s.cluster, s.ns, name))
            take_backup(s, s.ns, f"{name}-after-{index}", name)
            after = wait_decided(s, f"{name}-after-{index}")["status"]
            assert after["state"] == "Complete", after
            reach = after["binlog"]["archivedTo"]
            print(f">> {server.key}: the archive reaches {reach} (the drop: {dropped:%H:%M:%S})")
            return bool(reach) and utc(reach) >= dropped
        s.cluster.wait_for(archived_past_the_drop, timeout=300, interval=5,
                           what=f"{name}'s archive to reach past the drop")
        # the instance runs again once its backup records change: its status says it too
        def reported() -> bool:
            got = s.cluster.get("-n", s.ns, "mysqls.otus.homework", name).get("status", {}).get("backup", {})
            reach = got.get("pointInTime", {}).get("archivedTo")
            return bool(reach) and utc(reach) >= dropped and not got["pointInTime"].get("gap")
        s.cluster.wait_for(reported, timeout=180, what=f"{name}'s status to say how far its archive reaches")
        archived = oh.condition(s.cluster.get("-n", s.ns, "mysqls.otus.homework", name), "Archived") or {}
        assert (archived.get("status"), archived.get("reason")) == ("True", "Archiving"), archived

        started = time.monotonic()
        s.cluster.apply(oh.mysql_object(name, s.dr_ns, image=server.image, restore_from=at,
                                        backup=s3_backup(s.dr_ns, prefix=prefix)))
        oh.wait_successful(s.cluster, s.dr_ns, name, s.operator, timeout=600)
        oh.wait_ready(s.cluster, s.dr_ns, name)
        restored = sql(s.cluster, s.dr_ns, name, "SELECT GROUP_CONCAT(at ORDER BY id) FROM events;").strip()
        assert restored == "base,t1,t2,t3", restored
        print(f">> {server.key}: restored to {at}: {restored} ({time.monotonic() - started:.0f} s to Ready)")

        # the same point in time loaded into the running instance: the dropped table is back
        done = restore_record(s, f"{name}-undo", {"instance": name, "pointInTime": at})["status"]
        assert done["state"] == "Complete", done
        back = sql(s.cluster, s.ns, name, "SELECT GROUP_CONCAT(at ORDER BY id) FROM events;").strip()
        assert back == "base,t1,t2,t3", back
        assert "binlogs=" in done["jobMessage"], done

        # the log the base backup's position is in goes missing from the bucket: a gap
        missing = base["binlog"]["position"].split(":")[0]
        refused_over_a_gap(s, server, prefix, missing, at)
        gap_reported(s, name, missing)
        archive_lag_under_load(s, server)

    oh.for_each_server(one)


def test_after_the_loss_of_the_node_an_instance_in_another_namespace_restores_from_the_bucket(
        store: Store) -> None:
    """The instance is deleted (its backup at deletion goes to the bucket), then its data and
    backup volumes and their directories on the node are removed: nothing of it is left in
    the cluster. A new instance in another namespace names the file in the bucket (prefix of
    the lost one) and has every row back, the rows written after the last scheduled backup
    included."""
    s = store

    def one(server: oh.Server) -> None:
        name = server.name("s3")
        sql(s.cluster, s.ns, name, "CREATE TABLE late (id INT PRIMARY KEY); INSERT INTO late VALUES (7), (8);")
        expected = sql(s.cluster, s.ns, name, "SELECT COUNT(*) FROM kept; SELECT COUNT(*) FROM late;")
        s.cluster.kubectl("-n", s.ns, "delete", "mysqls.otus.homework", name, "--wait=true", "--timeout=420s", timeout=460)
        # the record of the backup taken at deletion, once its run has verified the file
        at_deletion: list[dict[str, Any]] = []

        def recorded() -> bool:
            at_deletion[:] = [r for r in records(s.cluster, s.ns, name)
                              if r.get("status", {}).get("origin") == "operator" and verified(r) in ("True", "False")]
            return bool(at_deletion)
        s.cluster.wait_for(recorded, timeout=300, what=f"the record of {name}'s backup at deletion")
        assert at_deletion[0]["status"]["state"] == "Complete", at_deletion[0]["status"]
        assert verified(at_deletion[0]) == "True", at_deletion[0]["status"]
        file = at_deletion[0]["spec"]["file"]
        # the node is lost: the volumes and their directories go
        # (their claims and volumes go once no pod of the namespace refers to them any more:
        # the finished Jobs' pods still do)
        s.cluster.kubectl("-n", s.ns, "delete", "pvc", "-l", f"app.kubernetes.io/instance={name}", "--wait=false")
        s.cluster.kubectl("delete", "pv", "-l", f"otus.homework/mysql-name={name},otus.homework/mysql-namespace={s.ns}",
                          "--wait=false")
        for kind in ("data", "backups"):
            for path in (oh.HOSTPATH_BASE / kind / s.ns).glob(f"{name}*"):
                shutil.rmtree(path)
        assert not list((oh.HOSTPATH_BASE / "backups" / s.ns).glob(f"{name}*"))

        s.cluster.apply(oh.mysql_object(name, s.dr_ns, image=server.image, restore_from=file,
                                        backup=s3_backup(s.dr_ns, prefix=f"{s.ns}/{name}")))
        oh.wait_successful(s.cluster, s.dr_ns, name, s.operator, timeout=600)
        oh.wait_ready(s.cluster, s.dr_ns, name)
        assert sql(s.cluster, s.dr_ns, name, "SELECT COUNT(*) FROM kept; SELECT COUNT(*) FROM late;") == expected
        job = s.cluster.get("-n", s.dr_ns, "job", f"{name}-restore")["status"]
        got = MEASURED.setdefault(server.key, {})
        got["restore_s"] = seconds(job["startTime"], job["completionTime"])
        line = (f"bucket {server.key} ({server.image}): on-demand backup of {size(got.get('size', 0))} "
                f"({BULK_ROWS} bulk rows), {size(got.get('stored', 0))} in the bucket, "
                f"{got.get('backup_s', 0):.0f} s to dump, ship and read back; restore Job after the loss "
                f"of the node (fetch and load of the backup at deletion) {got['restore_s']:.0f} s")
        print(f">> {line}")
        figures.measured(line)

    oh.for_each_server(one)


def test_a_backup_that_cannot_write_to_the_bucket_fails_naming_it(store: Store) -> None:
    """Wrong credentials: the backup is Failed, not Complete, and the Failure and the Warning
    Event name the bucket and the server's refusal; the key is not needed to say so."""
    s = store
    name = SERVERS[0].name("wrong")
    got = misdirected_backup(s, "now", credentials="s3-wrong")
    assert f"s3://{BUCKET}/{s.dr_ns}/{name}" in got["status"]["message"], got["status"]
    assert "SignatureDoesNotMatch" in got["status"]["message"], got["status"]
    warnings = oh.wait_warning(s.cluster, s.dr_ns, f"{name}-now", lambda m: f"s3://{BUCKET}/" in m)
    assert any("SignatureDoesNotMatch" in m for m in warnings), warnings
    print(f">> wrong credentials: {got['status']['message'][:300]}")


def test_a_backup_to_an_unreachable_endpoint_fails_naming_it(store: Store) -> None:
    """The instance of the wrong-credentials test, its spec.backup.s3 now naming an endpoint
    whose host does not resolve: the backup is Failed, and the record's status, its Failure
    condition and a Warning Event name the endpoint and the bucket's prefix. One image
    (SERVERS[0]): the failure is the shipping container's (objects.sh), not the server's."""
    s = store
    name = SERVERS[0].name("wrong")
    got = misdirected_backup(s, "unreachable", endpoint=UNREACHABLE_ENDPOINT)
    said = f"could not list s3://{BUCKET}/{s.dr_ns}/{name} at {UNREACHABLE_ENDPOINT}"
    assert said in got["status"]["message"], got["status"]
    failed_naming(s, f"{name}-unreachable", said)
    print(f">> an unreachable endpoint: {got['status']['message'][:300]}")


def test_a_backup_to_a_bucket_that_does_not_exist_fails_naming_it(store: Store) -> None:
    """The same instance, its spec.backup.s3 naming the store's endpoint and credentials and a
    bucket the store does not have: the backup is Failed, and the record's status, its
    Failure condition and a Warning Event name the bucket (the store would create it on a
    write: the listing first says it is not there). One image (SERVERS[0]), as above."""
    s = store
    name = SERVERS[0].name("wrong")
    got = misdirected_backup(s, "nobucket", bucket=MISSING_BUCKET)
    said = f"bucket {MISSING_BUCKET} does not exist at {ENDPOINT} (listing s3://{MISSING_BUCKET}/{s.dr_ns}/{name})"
    assert said in got["status"]["message"], got["status"]
    failed_naming(s, f"{name}-nobucket", said)
    listed = bucket_client(s, f'rclone --config "" -q lsf ":s3:" | grep -c "^{MISSING_BUCKET}/$" || true')
    assert listed.strip() == "0", listed
    print(f">> a bucket that does not exist: {got['status']['message'][:300]}")


def test_a_restore_from_the_bucket_without_the_key_is_refused_naming_it(store: Store) -> None:
    """An instance whose spec names no key cannot read an encrypted backup: its restore Job
    fails, and the Failure says the object is encrypted; no server starts on empty data as
    if it had been restored."""
    s = store
    server = SERVERS[0]
    lost = server.name("s3")
    files = [r["spec"]["file"] for r in records(s.cluster, s.ns, lost)
             if r.get("status", {}).get("origin") == "operator"]
    if not files:
        pytest.skip("needs the backup taken at deletion by the node-loss test")
    name = server.name("nokey")
    backup = s3_backup(s.dr_ns, prefix=f"{s.ns}/{lost}")
    del backup["encryptionSecret"]
    s.cluster.apply(oh.mysql_object(name, s.dr_ns, image=server.image, restore_from=files[0], backup=backup))

    def refused() -> bool:
        got = s.cluster.get("-n", s.dr_ns, "mysqls.otus.homework", name)
        failure = oh.condition(got, "Failure") or {}
        return "is encrypted" in str(failure.get("message", ""))
    s.cluster.wait_for(refused, timeout=420, what="the restore without the key to be refused")
    got = s.cluster.get("-n", s.dr_ns, "mysqls.otus.homework", name)
    message = str((oh.condition(got, "Failure") or {}).get("message"))
    assert f"s3://{BUCKET}/{s.ns}/{lost}/{files[0]}.zst.age is encrypted" in message, message
    print(f">> restore without the key: {message[:300]}")


def test_no_credential_or_key_reached_a_log_an_event_or_a_pod_spec(store: Store) -> None:
    """The store's credentials (right and wrong) and the age identity, Secrets of both
    namespaces, are in no operator log line, runner artifact, Event, status or pod, Job or
    CronJob spec (oh.leaks)."""
    s = store
    found = oh.leaks(s.cluster, s.ns, s.operator) + oh.leaks(s.cluster, s.dr_ns, s.operator)
    assert not found, found
