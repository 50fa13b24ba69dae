"""Faults as standing tests (issue 15, items 1 and 3): one object per server image goes
through create, password rotation, delete (with its backup) and re-creation (with its
restore). The operator is SIGKILLed at a random moment of the create, of the rotation and
while the backup Jobs run, and started again 5 s later; the API server is frozen
(SIGSTOP) for 30 s during the delete and during the re-create. After each stage every object
converges, has exactly one of each child, no Job is left running and no temporary Secret
is left behind, and no row is lost: 100 rows plus one marker row per stage are counted.

What is asserted are outcomes (rows, objects, conditions), never timings: the waits are
bounds for a failure message, not targets. The random moments are printed, so a failure
can be replayed (`FAULTS_SEED`)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests import harness, kube
from tests.integration import operator_harness as oh

SEED = int(os.environ.get("FAULTS_SEED", str(random.randrange(1 << 30))))
ROWS = 100
FREEZE = 30.0  # seconds the API server stays stopped
RESTART_AFTER = 5.0  # seconds between the operator's SIGKILL and its next start
SERVERS = [oh.Server(key=key, image=image) for key, image in sorted(kube.SERVER_IMAGES.items())]


class Stats:
    """The figures the module prints at its end."""

    kills = 0
    freezes = 0
    converged = 0
    rows_checked = 0


@pytest.fixture(scope="module")
def fault_namespace(cluster: harness.Cluster) -> Iterator[str]:
    name = cluster.create_namespace(f"fault-{uuid.uuid4().hex[:8]}")
    yield name
    oh.remove_namespace(cluster, name)


@pytest.fixture(scope="module")
def fault_operator(cluster: harness.Cluster, fault_namespace: str,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Operator]:
    oh.install_crd(cluster)
    running = oh.start_operator(cluster, fault_namespace, tmp_path_factory.mktemp("fault-operator"))
    try:
        yield running
    finally:
        if not running.alive():
            running.start()
        cluster.kubectl("-n", fault_namespace, "delete", "mysqls.otus.homework", "--all", "--timeout=300s",
                        check=False, timeout=330)
        running.stop()
        print(f"\nfaults (seed {SEED}): {Stats.kills} operator kills and {Stats.freezes} API server freezes "
              f"survived, {Stats.converged} object convergences, {Stats.rows_checked} rows checked")


def kill_at_random(operator: harness.Operator, rng: random.Random, what: str) -> None:
    """SIGKILL the operator (its whole process group) 0.3-4 s from now, then start it again."""
    delay = rng.uniform(0.3, 4.0)
    print(f"  killing the operator {delay:.2f}s into {what}")
    time.sleep(delay)
    os.killpg(operator.pid, signal.SIGKILL)
    assert operator.process is not None
    operator.process.wait(timeout=30)
    Stats.kills += 1
    time.sleep(RESTART_AFTER)
    operator.start()


def apiserver_pid() -> int:
    found = subprocess.run(["pgrep", "-x", "kube-apiserver"], capture_output=True, text=True, check=False)
    pids = found.stdout.split()
    assert len(pids) == 1, f"expected one kube-apiserver, found {pids}"
    return int(pids[0])


def freeze_apiserver(what: str) -> None:
    """Stop the API server for FREEZE seconds (SIGSTOP), then let it go on (SIGCONT)."""
    pid = apiserver_pid()
    print(f"  freezing the API server for {FREEZE:.0f}s during {what}")
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(FREEZE)
    finally:
        os.kill(pid, signal.SIGCONT)
    Stats.freezes += 1


def host(ns: str, name: str) -> str:
    return f"{name}.{ns}.svc.cluster.local"


def sql(cluster: harness.Cluster, ns: str, name: str, server: oh.Server, statement: str) -> str:
    return oh.sql_job(cluster, ns, host(ns, name), "otus-database", statement, secret=f"{name}-credentials",
                      image=server.image)


def converge(cluster: harness.Cluster, ns: str, operator: harness.Operator, names: list[str]) -> None:
    for name in names:
        oh.wait_successful(cluster, ns, name, operator, timeout=600)
        oh.wait_ready(cluster, ns, name, timeout=420)
        Stats.converged += 1


def assert_one_of_each(cluster: harness.Cluster, ns: str, name: str) -> None:
    """Exactly one Deployment, Service pair, data and backup claim, data volume and
    credentials Secret of the object; no temporary Secret; no Job of it still running."""
    def named(kind: str, *args: str) -> list[dict[str, Any]]:
        return [i for i in cluster.get(*args, kind)["items"] if i["metadata"]["name"].startswith(f"{name}-")
                or i["metadata"]["name"] == name]

    def names(items: list[dict[str, Any]]) -> list[str]:
        return sorted(i["metadata"]["name"] for i in items)

    assert names(named("deployments", "-n", ns)) == [name]
    assert names(named("services", "-n", ns)) == [name, f"{name}-direct"]
    assert names(named("persistentvolumeclaims", "-n", ns)) == [f"{name}-backup", f"{name}-data"]
    assert names(named("secrets", "-n", ns)) == [f"{name}-credentials"]
    running = [j["metadata"]["name"] for j in named("jobs", "-n", ns) if j.get("status", {}).get("active")]
    assert running == [], f"Jobs of {name} still running after it converged: {running}"
    data = [v["metadata"]["name"] for v in cluster.get("pv")["items"]
            if v["metadata"]["name"].startswith(f"mysql-data-{ns}-{name}-")
            and not v["metadata"].get("deletionTimestamp")]
    assert len(data) == 1, data


def count_rows(cluster: harness.Cluster, ns: str, name: str, server: oh.Server, markers: list[str]) -> None:
    out = sql(cluster, ns, name, server, "SELECT COUNT(*) FROM t; SELECT v FROM marks ORDER BY id;")
    lines = out.strip().splitlines()
    assert lines[0] == str(ROWS), out
    assert lines[1:] == markers, out
    Stats.rows_checked += ROWS + len(markers)


def mark(cluster: harness.Cluster, ns: str, name: str, server: oh.Server, markers: list[str], stage: str) -> None:
    markers.append(f"{stage}-{uuid.uuid4().hex[:6]}")
    sql(cluster, ns, name, server, f"INSERT INTO marks (v) VALUES ('{markers[-1]}');")


def test_every_object_converges_and_keeps_its_rows_through_kills_and_freezes(
        cluster: harness.Cluster, fault_namespace: str, fault_operator: harness.Operator) -> None:
    if not cluster.local:
        pytest.skip("freezes the API server: the local cluster only")
    rng = random.Random(SEED)
    print(f"\nfaults: seed {SEED} (FAULTS_SEED={SEED} replays the random moments)")
    ns, operator = fault_namespace, fault_operator
    names = {server.key: server.name("fault") for server in SERVERS}
    markers: dict[str, list[str]] = {server.key: [] for server in SERVERS}

    # 1. Create, the operator killed at a random moment of it.
    for server in SERVERS:
        cluster.apply(oh.mysql_object(names[server.key], ns, image=server.image))
    kill_at_random(operator, rng, "the create")
    converge(cluster, ns, operator, list(names.values()))
    values = ", ".join(f"({i}, 'row-{i}')" for i in range(ROWS))
    for server in SERVERS:
        name = names[server.key]
        assert_one_of_each(cluster, ns, name)
        sql(cluster, ns, name, server,
            "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40)); "
            "CREATE TABLE marks (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(40)); "
            f"INSERT INTO t VALUES {values};")
        mark(cluster, ns, name, server, markers[server.key], "created")
        count_rows(cluster, ns, name, server, markers[server.key])

    # 2. Password rotation, the operator killed at a random moment of it: the new password
    # works (the SQL Jobs read it from the Secret), the rows are all there.
    for server in SERVERS:
        cluster.kubectl("-n", ns, "patch", "mysqls.otus.homework", names[server.key], "--type=merge",
                        "-p", '{"spec":{"password":"rotated-' + uuid.uuid4().hex[:8] + '"}}')
    kill_at_random(operator, rng, "the password rotation")
    converge(cluster, ns, operator, list(names.values()))
    for server in SERVERS:
        name = names[server.key]
        assert_one_of_each(cluster, ns, name)
        mark(cluster, ns, name, server, markers[server.key], "rotated")
        count_rows(cluster, ns, name, server, markers[server.key])

    # 3. Delete, the API server frozen for 30 s during it, then the operator killed while
    # the backup Jobs run: the objects still go only with a complete backup.
    for server in SERVERS:
        cluster.kubectl("-n", ns, "delete", "mysqls.otus.homework", names[server.key], "--wait=false")
    time.sleep(rng.uniform(0.3, 4.0))
    freeze_apiserver("the delete")
    cluster.wait_for(lambda: all(
        cluster.kubectl("-n", ns, "get", "job", f"{name}-backup", check=False).returncode == 0
        for name in names.values()) or cluster.get("-n", ns, "mysqls.otus.homework")["items"] == [],
        timeout=300, what="the backup Jobs to start", interval=1)
    kill_at_random(operator, rng, "the backup Jobs")
    cluster.wait_for(lambda: cluster.get("-n", ns, "mysqls.otus.homework")["items"] == [], timeout=600,
                     what="the deleted objects to go", interval=2)
    for name in names.values():
        claim = cluster.get("-n", ns, "pvc", f"{name}-backup")
        assert claim["metadata"].get("annotations", {}).get("otus.homework/latest-backup"), claim["metadata"]

    # 4. Re-create, the API server frozen for 30 s meanwhile: the restore brings every row back.
    for server in SERVERS:
        cluster.apply(oh.mysql_object(names[server.key], ns, image=server.image))
    time.sleep(rng.uniform(0.3, 4.0))
    freeze_apiserver("the re-create and restore")
    converge(cluster, ns, operator, list(names.values()))
    for server in SERVERS:
        name = names[server.key]
        assert_one_of_each(cluster, ns, name)
        restore = cluster.get("-n", ns, "job", f"{name}-restore")
        assert restore["status"].get("succeeded") == 1, restore["status"]
        count_rows(cluster, ns, name, server, markers[server.key])
    assert operator.alive(), operator.log()[-4000:]
