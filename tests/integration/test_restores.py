"""Restores that lose nothing and never make things worse, on both server images, against the
local cluster's object store (tests/integration/bucket.py): an instance archiving its binary
logs every 5 s (spec.backup.pointInTime) is written to by a client of the test's own, one row
every ~0.2 s, each acknowledgement's time recorded, through an on-demand backup taken during
the load and past a dozen logs and more (the sequence crosses .000009 -> .000010).

- A MySQLRestore to a second T1 of the load brings back every row acknowledged at or before
  T1 and none started after it (the chosen second is included whole: binary-log events carry
  whole seconds); an ALTER TABLE of the database run from another database's session is
  replayed, a DROP TABLE of another database's table run from this one's is not.
- After more writes, a second MySQLRestore to T2 replays from the same backup across the
  first restore (its DROP, CREATE and load are in the logs): the rows of T1 and those written
  after the first restore up to T2. On MariaDB the instance runs with gtid_strict_mode on.
- A new instance in another namespace restoring T2 from the same prefix holds the same rows.
- A restore to a time with no write since the newest backup has nothing to replay, and loads
  that backup, not the newer one the copy took in the same prefix (another lineage).
- Restores that fail leave the live rows as they were: a time the archive has not reached, a
  gap in the archive, a backup object that does not decrypt.
- No archived binary log holds a password: the instance's password is rotated while its logs
  are archived, and every log in the bucket is decrypted and searched for every Secret value
  of the namespace.

Each image's figures line says how many acknowledged rows came back, how many started after
the time stayed out, and how many logs the replay crossed.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests import figures, harness
from tests.integration import bucket
from tests.integration import operator_harness as oh

SERVERS = oh.SERVERS
PASSWORD = "otuspassword"
DATABASE = "otus-database"
ARCHIVE_SECONDS = 5
LOAD_SECONDS = 75  # past a dozen logs at ARCHIVE_SECONDS
SECOND_LOAD_SECONDS = 20
WRITE_PAUSE = 0.2


@dataclass
class Module:
    cluster: harness.Cluster
    ns: str
    dr_ns: str
    operator: harness.Operator


@pytest.fixture(scope="module")
def restores(cluster: harness.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Module]:
    if not cluster.local:
        pytest.skip("the object store is the local cluster's (cluster/cluster.sh object-store)")
    print(">> the local cluster's object store (SeaweedFS)", flush=True)
    credentials = bucket.store_credentials(cluster)
    identity = bucket.age_identity()
    with oh.module_namespace(cluster, "restores") as ns, oh.module_namespace(cluster, "restores-dr") as dr_ns, \
            oh.operator_in(cluster, f"{ns},{dr_ns}", tmp_path_factory.mktemp("restores-operator")) as operator:
        for where in (ns, dr_ns):
            bucket.give_secrets(cluster, where, credentials, identity)
        cluster.apply(bucket.secret(dr_ns, "other-key", {"identity": bucket.age_identity()}))
        bucket.start_client(cluster, ns)
        for server in SERVERS:
            cluster.apply(instance(server, ns))
        try:
            bucket.wait_client(cluster, ns)
            for server in SERVERS:
                oh.wait_successful(cluster, ns, server.name("pt"), operator)
                oh.wait_ready(cluster, ns, server.name("pt"))
            yield Module(cluster, ns, dr_ns, operator)
        except BaseException:
            print(oh.diagnostics(cluster, ns, operator))
            print(oh.diagnostics(cluster, dr_ns, None))
            raise


def backup_spec(ns: str, **s3: str) -> dict[str, Any]:
    return {**bucket.s3_backup(ns, **s3), "verify": False,
            "pointInTime": {"enabled": True, "archiveSeconds": ARCHIVE_SECONDS}}


def instance(server: oh.Server, ns: str, **spec: Any) -> str:
    """The archiving instance `pt-<image>`; MariaDB's with gtid_strict_mode on (a replay must
    not trip on the out-of-order GTIDs an earlier in-place restore leaves in the logs)."""
    config = {"gtid_strict_mode": "ON"} if "mariadb" in server.image else {}
    return oh.mysql_object(server.name("pt"), ns, image=server.image, backup=backup_spec(ns), config=config,
                           **spec)


# --- the client and its acknowledgements ------------------------------------------------------

@dataclass
class Write:
    id: int
    start: float  # seconds since the epoch, when the client sent it
    ack: float | None  # when the server acknowledged it (None: refused or cut off)


@dataclass
class Writes:
    done: list[Write] = field(default_factory=list)

    def acknowledged_by(self, second: int) -> set[int]:
        """Rows acknowledged at or before the end of `second` (its whole second: a write
        acknowledged at T.5 for T is 'at T' to a restore of T)."""
        return {w.id for w in self.done if w.ack is not None and w.ack < second + 1}

    def started_after(self, second: int) -> set[int]:
        """Rows whose statement started after the whole second `second`."""
        return {w.id for w in self.done if w.start >= second + 1}


def server_pod(cluster: harness.Cluster, ns: str, name: str) -> str:
    pods = [p for p in cluster.get("-n", ns, "pods", "-l", f"app={name}")["items"]
            if not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") == "Running"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return str(pods[0]["metadata"]["name"])


def sql(cluster: harness.Cluster, ns: str, name: str, statement: str) -> str:
    return cluster.kubectl("-n", ns, "exec", server_pod(cluster, ns, name), "-c", "mysql", "--", "mysql",
                           "-uroot", f"-p{PASSWORD}", "-N", "-B", DATABASE, "-e", statement, timeout=300).stdout


def sql_in(cluster: harness.Cluster, ns: str, name: str, database: str, statement: str) -> str:
    """`statement` in a session whose default database is `database`."""
    return cluster.kubectl("-n", ns, "exec", server_pod(cluster, ns, name), "-c", "mysql", "--", "mysql",
                           "-uroot", f"-p{PASSWORD}", "-N", "-B", database, "-e", statement, timeout=300).stdout


def rows(cluster: harness.Cluster, ns: str, name: str) -> set[int]:
    return {int(line) for line in sql(cluster, ns, name, "SELECT id FROM acks").split()}



def write(cluster: harness.Cluster, ns: str, name: str, first: int, seconds: float, into: Writes) -> None:
    """A client in the server's pod inserts rows first, first+1, ... one statement each, on a
    connection of its own, for `seconds`; each row's send and acknowledgement times (the
    node's clock, which the server's is) go to `into`."""
    script = f"""
        n={first} end=$(( $(date +%s) + {math.ceil(seconds)} ))
        while [ "$(date +%s)" -lt "$end" ]; do
          s=$(date +%s.%N)
          if mysql -uroot -p"$(cat /etc/mysql-operator/credentials/password)" '{DATABASE}' \\
               -e "INSERT INTO acks (id) VALUES ($n)" 2>/dev/null; then
            echo "$n $s $(date +%s.%N)"
          else
            echo "$n $s -"
          fi
          n=$((n + 1))
          sleep {WRITE_PAUSE}
        done
    """
    out = cluster.kubectl("-n", ns, "exec", server_pod(cluster, ns, name), "-c", "mysql", "--", "sh", "-c",
                          script, timeout=seconds + 300).stdout
    for line in out.splitlines():
        found = re.fullmatch(r"(\d+) ([\d.]+) ([\d.]+|-)", line.strip())
        if found:
            into.done.append(Write(int(found[1]), float(found[2]), None if found[3] == "-" else float(found[3])))


def utc(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


# --- the bucket -------------------------------------------------------------------------------

def archive_id(m: Module, name: str) -> str:
    return sql(m.cluster, m.ns, name, "SELECT server FROM mysql_operator.binlog_archive WHERE id = 1").strip()


def archived_logs(m: Module, prefix: str, server: str) -> list[str]:
    out = bucket.run_in_client(m.cluster, m.ns, f'rclone --config "" -q lsf ":s3:{bucket.BUCKET}/{prefix}/binlogs/{server}/"')
    return sorted(line for line in out.split() if line.startswith("mysql-bin."))


def wait_archived_past(m: Module, prefix: str, server: str, second: int) -> None:
    """Until the archive reaches past `second`: a log closed after it is in the bucket, or
    the archive's `reach` (everything up to a quiet moment shipped) is after it."""
    def reached() -> bool:
        closes = [int(found[1]) for log in archived_logs(m, prefix, server)
                  if (found := re.search(r"-(\d+)[.]zst", log))]
        reach = bucket.run_in_client(m.cluster, m.ns, f'rclone --config "" -q cat '
                                                      f'":s3:{bucket.BUCKET}/{prefix}/binlogs/{server}/reach" || true')
        return max([*closes, int(reach.strip() or 0)]) > second + 1
    m.cluster.wait_for(reached, timeout=180, interval=3, what=f"the archive of {prefix} to reach past {utc(second)}")


def restore(m: Module, name: str, spec: dict[str, str]) -> dict[str, Any]:
    m.cluster.apply(json.dumps({"apiVersion": "otus.homework/v1", "kind": "MySQLRestore",
                                "metadata": {"name": name, "namespace": m.ns}, "spec": spec}))
    m.cluster.wait_for(lambda: m.cluster.get("-n", m.ns, "mysqlrestores.otus.homework", name).get(
        "status", {}).get("state") in ("Complete", "Failed"), timeout=600, what=f"MySQLRestore {name} to finish")
    return dict(m.cluster.get("-n", m.ns, "mysqlrestores.otus.homework", name)["status"])


def take_backup(m: Module, backup: str, instance_name: str, ns: str | None = None) -> dict[str, Any]:
    where = ns or m.ns
    m.cluster.apply(json.dumps({"apiVersion": "otus.homework/v1", "kind": "MySQLBackup",
                                "metadata": {"name": backup, "namespace": where},
                                "spec": {"instance": instance_name}}))

    def settled() -> bool:  # (the module's backups are not verified: Verified Unknown for good)
        status = oh.backup_record(m.cluster, where, backup).get("status", {})
        return status.get("state") == "Failed" or (
            status.get("state") == "Complete" and (oh.condition({"status": status}, "Verified") or {}).get(
                "reason") == "NotVerified")
    m.cluster.wait_for(settled, timeout=600, what=f"MySQLBackup {where}/{backup} to be taken")
    found = oh.backup_record(m.cluster, where, backup)
    assert found["status"]["state"] == "Complete", found["status"]
    return found


def assert_point(restored: set[int], writes: Writes, second: int, what: str) -> str:
    """Every row acknowledged by `second` is back, none started after it; the figures."""
    wanted, unwanted = writes.acknowledged_by(second), writes.started_after(second)
    lost, extra = wanted - restored, restored & unwanted
    assert not lost, f"{what}: {len(lost)} of {len(wanted)} rows acknowledged by {utc(second)} are missing: {sorted(lost)[:20]}"
    assert not extra, f"{what}: {len(extra)} rows started after {utc(second)} are back: {sorted(extra)[:20]}"
    return f"{len(wanted)} acknowledged rows back, {len(unwanted)} later ones out"


# --- the test -----------------------------------------------------------------------------------

@dataclass
class Flow:
    """One image's run of the test, stage by stage: what each stage leaves, the next reads."""

    m: Module
    server: oh.Server
    first: Writes = field(default_factory=Writes)
    second: Writes = field(default_factory=Writes)
    server_id: str = ""
    logs: list[str] = field(default_factory=list)
    t1: int = 0
    t2: int = 0
    after_two: set[int] = field(default_factory=set)
    said: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.server.name("pt")

    @property
    def prefix(self) -> str:
        return f"{self.m.ns}/{self.name}"

    def load(self) -> None:
        """The table, a password rotation while the logs are archived (no log may hold the
        password), then the load, and the base backup taken while it runs."""
        m, name = self.m, self.name
        m.cluster.wait_for(lambda: archive_id(m, name) != "", timeout=120, what=f"{name}'s archive identity")
        self.server_id = archive_id(m, name)
        sql(m.cluster, m.ns, name, "CREATE TABLE acks (id INT PRIMARY KEY, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))")
        for password in (PASSWORD + "-rotated", PASSWORD):
            m.cluster.kubectl("-n", m.ns, "patch", "mysqls.otus.homework", name, "--type=merge",
                              "-p", json.dumps({"spec": {"password": password}}))
            oh.wait_successful(m.cluster, m.ns, name, m.operator)
        sql(m.cluster, m.ns, name, "CREATE DATABASE IF NOT EXISTS side; CREATE TABLE side.x (id INT)")
        loader = threading.Thread(target=write, args=(m.cluster, m.ns, name, 1, LOAD_SECONDS, self.first))
        loader.start()
        time.sleep(8)
        take_backup(m, f"{name}-base", name)
        # statements on another database than the session's: the replay must take the first
        # (it changes the database's table) and leave the second (it is another database's)
        sql_in(m.cluster, m.ns, name, "side", f"ALTER TABLE `{DATABASE}`.acks ADD COLUMN note VARCHAR(8) DEFAULT 'kept'")
        sql(m.cluster, m.ns, name, "DROP TABLE side.x")
        loader.join()
        assert self.first.done and all(w.ack for w in self.first.done), [w for w in self.first.done if not w.ack][:5]
        self.logs = archived_logs(m, self.prefix, self.server_id)
        sequences = [int(found[1]) for log in self.logs if (found := re.match(r"mysql-bin[.](\d+)-", log))]
        assert len(self.logs) >= 12 and max(sequences) >= 10, self.logs  # past .000009 -> .000010

    def in_place(self) -> None:
        """A MySQLRestore to a second near the end of the load."""
        m, name = self.m, self.name
        self.t1 = int(self.first.done[-1].ack or 0) - 8
        wait_archived_past(m, self.prefix, self.server_id, self.t1)
        sql(m.cluster, m.ns, name, "CREATE TABLE side.x (id INT)")  # the live server's, after the drop
        done = restore(m, f"{name}-r1", {"instance": name, "pointInTime": utc(self.t1)})
        assert done["state"] == "Complete", done
        columns = sql(m.cluster, m.ns, name, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE "
                                             f"TABLE_SCHEMA = '{DATABASE}' AND TABLE_NAME = 'acks'").split()
        assert "note" in columns, columns  # the ALTER run from the side database was replayed
        side = sql(m.cluster, m.ns, name, "SELECT COUNT(*) FROM information_schema.TABLES "
                                          "WHERE TABLE_SCHEMA = 'side' AND TABLE_NAME = 'x'").strip()
        assert side == "1", "the replay dropped side.x, another database's table"
        replayed = re.search(r"binlogs=(\d+)", done.get("jobMessage", ""))
        assert replayed and int(replayed[1]) >= 8, done
        back = assert_point(rows(m.cluster, m.ns, name), self.first, self.t1, f"{name} restored to {utc(self.t1)}")
        self.said.append(f"{replayed[1]} logs replayed to T1, {back}")

    def in_place_again(self) -> None:
        """More writes, then a MySQLRestore to a second of them, from the same backup: its
        replay crosses the first restore."""
        m, name = self.m, self.name
        write(m.cluster, m.ns, name, 100_000, SECOND_LOAD_SECONDS, self.second)
        self.t2 = int(self.second.done[-1].ack or 0) - 5
        wait_archived_past(m, self.prefix, self.server_id, self.t2)
        done = restore(m, f"{name}-r2", {"instance": name, "pointInTime": utc(self.t2)})
        assert done["state"] == "Complete", done
        kept = self.first.acknowledged_by(self.t1)
        both = Writes([w for w in self.first.done if w.id in kept] + self.second.done)
        back = assert_point(rows(m.cluster, m.ns, name), both, self.t2, f"{name} restored again to {utc(self.t2)}")
        self.after_two = rows(m.cluster, m.ns, name)
        self.said.append(f"again to T2, across the first restore: {back}")

    def elsewhere(self) -> None:
        """A new instance in another namespace restores T2 from the same prefix."""
        m, name = self.m, self.name
        m.cluster.apply(oh.mysql_object(name, m.dr_ns, image=self.server.image, restore_from=utc(self.t2),
                                        backup=backup_spec(m.dr_ns, prefix=self.prefix)))
        oh.wait_successful(m.cluster, m.dr_ns, name, m.operator, timeout=600)
        oh.wait_ready(m.cluster, m.dr_ns, name)
        copy = rows(m.cluster, m.dr_ns, name)
        assert copy == self.after_two, sorted(copy ^ self.after_two)[:20]

    def with_nothing_to_replay(self) -> None:
        """A restore to a time with no write since the instance's newest backup loads that
        backup. Meanwhile the copy in the other namespace, which archives and backs up to the
        same prefix, wrote a row of its own and took a newer backup there: a backup of another
        lineage, which the instance's restore does not choose."""
        m, name = self.m, self.name
        take_backup(m, f"{name}-quiet", name)
        copy = server_pod(m.cluster, m.dr_ns, name)
        m.cluster.kubectl("-n", m.dr_ns, "exec", copy, "-c", "mysql", "--", "mysql", "-uroot", f"-p{PASSWORD}",
                          DATABASE, "-e", "INSERT INTO acks (id) VALUES (900000)")
        take_backup(m, f"{name}-copy", name, ns=m.dr_ns)
        now = int(time.time()) + 1
        wait_archived_past(m, self.prefix, self.server_id, now)
        done = restore(m, f"{name}-r3", {"instance": name, "pointInTime": utc(now)})
        assert done["state"] == "Complete", done
        assert rows(m.cluster, m.ns, name) == self.after_two

    def failing(self) -> None:
        """Restores that fail leave the live rows alone: a time the archive has not reached,
        a gap in the archive, and (a new instance) another key than the backups'."""
        m, name = self.m, self.name
        done = restore(m, f"{name}-future", {"instance": name, "pointInTime": utc(int(time.time()) + 3600)})
        assert done["state"] == "Failed" and "reach" in done.get("jobMessage", ""), done
        assert rows(m.cluster, m.ns, name) == self.after_two
        needed = [log for log in archived_logs(m, self.prefix, self.server_id)
                  if (found := re.search(r"-(\d+)[.]zst", log))
                  and int(self.first.done[0].start) < int(found[1]) < self.t1]
        assert needed, self.logs
        gone = needed[len(needed) // 2]
        bucket.run_in_client(m.cluster, m.ns, f'rclone --config "" -q deletefile '
                                              f'":s3:{bucket.BUCKET}/{self.prefix}/binlogs/{self.server_id}/{gone}"')
        done = restore(m, f"{name}-gap", {"instance": name, "pointInTime": utc(self.t1)})
        assert done["state"] == "Failed" and "gap in the binary logs" in done.get("jobMessage", ""), done
        assert rows(m.cluster, m.ns, name) == self.after_two
        wrong = f"{name}-wrongkey"
        m.cluster.apply(oh.mysql_object(wrong, m.dr_ns, image=self.server.image, restore_from=utc(self.t2),
                                        backup={**backup_spec(m.dr_ns, prefix=self.prefix),
                                                "encryptionSecret": "other-key"}))

        def refused() -> bool:
            failure = oh.condition(m.cluster.get("-n", m.dr_ns, "mysqls.otus.homework", wrong), "Failure") or {}
            return failure.get("status") == "True" and "decrypt" in str(failure.get("message"))
        m.cluster.wait_for(refused, timeout=420, what=f"the restore of {wrong} with the wrong key to be refused")


def test_point_in_time_restores_bring_back_every_acknowledged_write_and_never_make_things_worse(
        restores: Module) -> None:
    def one(server: oh.Server) -> None:
        flow = Flow(restores, server)
        for stage in (flow.load, flow.in_place, flow.in_place_again, flow.elsewhere, flow.with_nothing_to_replay,
                      flow.failing):
            print(f"  {server.key}: {stage.__name__.replace('_', ' ')}", flush=True)
            stage()
        figures.add("point-in-time restores checked", 3)
        line = f"restores {server.key}: {len(flow.logs)} logs archived by the end of the load; " + "; ".join(flow.said)
        print(f">> {line}")
        figures.measured(line)

    oh.for_each_server(one)


def test_no_archived_binary_log_holds_a_password(restores: Module) -> None:
    """Every archived log of both instances, decrypted with the module's key, searched for
    every Secret value of the namespace (the root password before and after the rotation the
    first test made, the health account's, the bootstrap one): none is found."""
    m = restores
    values = sorted(v for v in oh.secret_values(m.cluster, m.ns) if len(v) >= 8)
    assert values
    searched = 0
    for server in SERVERS:
        name = server.name("pt")
        prefix = f"{m.ns}/{name}"
        server_id = archive_id(m, name)
        out = _search(m, prefix, server_id, values)
        counted = re.search(r"searched=(\d+)", out)
        assert counted, out
        searched += int(counted[1])
        assert "found=0" in out, out
    assert searched >= 2 * 12, searched
    figures.add("archived logs searched for secrets", searched)


def _search(m: Module, prefix: str, server_id: str, values: list[str]) -> str:
    """Search every archived log of `server_id` under `prefix` for `values` (handed over on
    stdin, never on a command line), in the bucket client's pod."""
    script = f"""
        cat > /tmp/patterns
        printf '%s\\n' "$AGE_IDENTITY" > /tmp/key
        n=0 found=0
        for log in $(rclone --config "" -q lsf ":s3:{bucket.BUCKET}/{prefix}/binlogs/{server_id}/" | grep '^mysql-bin[.]'); do
          rclone --config "" -q cat ":s3:{bucket.BUCKET}/{prefix}/binlogs/{server_id}/$log" | age -d -i /tmp/key | zstd -q -d -c > /tmp/log
          n=$((n + 1))
          if grep -a -F -q -f /tmp/patterns /tmp/log; then found=$((found + 1)); echo "found in $log"; fi
        done
        rm -f /tmp/key /tmp/log /tmp/patterns
        echo "searched=$n found=$found"
    """
    try:
        return bucket.run_in_client(m.cluster, m.ns, script, stdin="\n".join(values) + "\n")
    except subprocess.CalledProcessError as e:
        raise AssertionError(e.stderr) from None
