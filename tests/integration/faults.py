"""The fault tests' shared parts (test_faults.py, test_faults_servers.py and
test_faults_freeze.py): the faults themselves (the operator SIGKILLed and started again, the
API server frozen, a server killed mid-dump or mid-load, a full backup volume), what must
hold after each (one of each child, every row and marker), and the Scenario whose stages
the three modules run on one object per server image.

What is asserted are outcomes (rows, objects, conditions), never timings: the waits are
bounds for a failure message, not targets. The random moments are printed, so a failure
can be replayed (`FAULTS_SEED`). Server kills, the full disk and the freezes need the
local cluster (its node is this host: the tests find the server and the dump in /proc,
mount the tmpfs and stop the API server's process).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import figures, harness
from tests.integration import operator_harness as oh

SEED = int(os.environ.get("FAULTS_SEED", str(random.randrange(1 << 30))))
ROWS = 100
BIG_ROWS = 1 << 17  # rows of 200 bytes: a dump of about 27 MB, long enough to kill a server in
# (and more than the 16 MiB that Oracle MySQL's client reads of a file at once: a smaller
# restore would be read whole before the server could be killed mid-way)
FREEZE = 30.0  # seconds the API server stays stopped
RESTART_AFTER = 2.0  # seconds between the operator's SIGKILL and its next start
SERVERS = oh.SERVERS
# A second name of each local image, as official images have several tags for one build
# (mysql:8.4 and mysql:8.4.3): the image change rolls the server without changing its software.
ALIASES = {"localhost/mariadb:10.11-bookworm": "localhost/mariadb:10.11",
           "localhost/mysql:9.7-debian": "localhost/mysql:9.7"}
SERVER_COMMANDS = {"mysqld", "mariadbd"}
FULL_DISK_HEADROOM = 64 << 20  # bytes of the tmpfs beyond the backups already on it
FULL_DISK_LEFT = 16 << 10  # bytes the filler leaves free: the dump starts, then hits ENOSPC


class Stats:
    """The figures a fault module prints at its end (and tests/conftest.py in the suite's
    summary): counted from the module's start (reset), added to the suite's at its end
    (report)."""

    kills = 0
    server_kills = 0
    freezes = 0
    full_disks = 0
    converged = 0
    rows_checked = 0

    @classmethod
    def reset(cls) -> None:
        cls.kills = cls.server_kills = cls.freezes = cls.full_disks = cls.converged = cls.rows_checked = 0

    @classmethod
    def report(cls, module: str) -> None:
        figures.add("operator kills survived", cls.kills)
        figures.add("server kills survived", cls.server_kills)
        figures.add("API server freezes survived", cls.freezes)
        figures.add("full backup volumes survived", cls.full_disks)
        figures.add("objects converged", cls.converged)
        figures.add("rows checked", cls.rows_checked)
        print(f"\n{module} (seed {SEED}): {cls.kills} operator kills, {cls.server_kills} server kills, "
              f"{cls.freezes} API server freezes and {cls.full_disks} full backup volumes survived, "
              f"{cls.converged} object convergences, {cls.rows_checked} rows checked")


@contextlib.contextmanager
def module_operator(cluster: harness.Cluster, prefix: str, workdir: Path) -> Iterator[tuple[str, harness.Operator]]:
    """A fault module's namespace and operator; its figures counted from here, reported after."""
    Stats.reset()
    with oh.module_namespace(cluster, prefix) as ns, oh.operator_in(cluster, ns, workdir) as operator:
        yield ns, operator
    Stats.report(prefix)


def local_cluster_only(cluster: harness.Cluster) -> None:
    if not cluster.local:
        pytest.skip("kills servers, freezes the API server, mounts a tmpfs: the local cluster only")


def run_stages(stages: list[Callable[[], None]]) -> None:
    print(f"\nfaults: seed {SEED} (FAULTS_SEED={SEED} replays the random moments)")
    for number, stage in enumerate(stages, 1):
        print(f"stage {number}: {stage.__name__.replace('_', ' ')}", flush=True)
        stage()


# --- faults ------------------------------------------------------------------------------------

def kill_at_random(operator: harness.Operator, rng: random.Random, what: str) -> None:
    """SIGKILL the operator 0.3-4 s from now (kill_operator)."""
    kill_operator(operator, what, rng.uniform(0.3, 4.0))


def kill_operator(operator: harness.Operator, what: str, delay: float = 0.0) -> None:
    """SIGKILL the operator (its whole process group) `delay` s from now, then start it again."""
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


def client_of(argv: list[str], host: str, program: str) -> bool:
    """Whether `argv` is `program` (mysql, mysqldump) connecting to `host` (the scripts' -h)."""
    return bool(argv) and Path(argv[0]).name == program and oh.client_host(argv) == host


def server_pid(pod: dict[str, Any]) -> int | None:
    """The server process of `pod` on this host: mysqld/mariadbd in the pod's cgroup."""
    uid = pod["metadata"]["uid"]
    for pid, _ in oh.processes():
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if comm in SERVER_COMMANDS and (uid in cgroup or uid.replace("-", "_") in cgroup):
            return pid
    return None


def server_pod(cluster: harness.Cluster, ns: str, name: str) -> dict[str, Any] | None:
    """The object's running server pod, if it has exactly one."""
    pods = [p for p in cluster.get("-n", ns, "pods", "-l", f"app={name}")["items"]
            if not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") == "Running"]
    return dict(pods[0]) if len(pods) == 1 else None


def kill_servers_during(cluster: harness.Cluster, ns: str, program: str,
                        in_progress: dict[str, Callable[[int], str]], *, timeout: float = 600) -> dict[str, str]:
    """For each object named in `in_progress`: wait until `program` (a Job's client) runs
    against the object's Service and `in_progress[name](pid)` says it is mid-way, then
    SIGKILL its server process (it dies mid-statement) and force-delete its pod; return
    what was seen at each kill. The objects are watched together, so clients that run at
    the same time are each caught. Server pods are looked up ahead (kubectl is slow next
    to a dump), their processes in /proc at the kill."""
    hosts = {name: f"{name}.{ns}.svc.cluster.local" for name in in_progress}
    deadline = time.monotonic() + timeout
    pods: dict[str, dict[str, Any] | None] = {}
    looked_up: dict[str, float] = {}
    seen: dict[str, str] = {}
    while time.monotonic() < deadline and len(seen) < len(hosts):
        for name in hosts.keys() - seen.keys():
            if pods.get(name) is None or time.monotonic() - looked_up[name] > 5:
                pods[name], looked_up[name] = server_pod(cluster, ns, name), time.monotonic()
        for pid, argv in oh.processes():
            client = next((n for n, host in hosts.items() if n not in seen and client_of(argv, host, program)), None)
            pod = pods.get(client) if client else None
            if client is None or pod is None or oh.runs_a_statement(argv) or not in_progress[client](pid):
                continue
            server = server_pid(pod)
            now = in_progress[client](pid)  # again, right before the kill: still mid-way
            if server is None or not now:
                looked_up[client] = 0.0  # the pod was replaced (look it up again) or the client is done
                continue
            os.kill(server, signal.SIGKILL)
            cluster.kubectl("-n", ns, "delete", "pod", pod["metadata"]["name"], "--grace-period=0", "--force",
                            "--wait=false", check=False)
            Stats.server_kills += 1
            seen[client] = now
        time.sleep(0.02)
    missed = sorted(hosts.keys() - seen.keys())
    assert not missed, f"{program} never ran mid-way against {', '.join(hosts[n] for n in missed)} within {timeout:.0f}s"
    return seen


def dump_in_progress(ns: str, name: str) -> Callable[[int], str]:
    """For kill_servers_during: a partial dump file that already holds rows."""
    def check(pid: int) -> str:
        for partial in oh.backup_dir(ns, name).glob(".*.partial"):
            size = partial.stat().st_size if partial.exists() else 0
            if size > 1 << 18 and Path(f"/proc/{pid}").exists():
                return f"{partial.name} at {size} bytes"
        return ""
    return check


def load_in_progress(ns: str, name: str) -> Callable[[int], str]:
    """For kill_servers_during: the restore's client has read part of the backup file."""
    def check(pid: int) -> str:
        try:
            target = os.readlink(f"/proc/{pid}/fd/0")
            info = Path(f"/proc/{pid}/fdinfo/0").read_text()
        except OSError:
            return ""
        position = int(next(line.split()[1] for line in info.splitlines() if line.startswith("pos:")))
        backup = oh.backup_dir(ns, name) / Path(target).name
        if not target.startswith("/backup/") or not backup.is_file():
            return ""  # (the restore's safety copy, or no file at all)
        size = backup.stat().st_size
        return f"{Path(target).name} at {position} of {size} bytes" if 1 << 20 < position < size - (1 << 20) else ""
    return check


# --- the full backup volume --------------------------------------------------------------------

def tmpfs_mounts(under: Path) -> list[Path]:
    mounts = [Path(line.split()[1]) for line in Path("/proc/mounts").read_text().splitlines()
              if line.split()[2] == "tmpfs"]
    return [m for m in mounts if m == under or under in m.parents]


def unmount(mount: Path) -> None:
    """Unmount a tmpfs over a backup directory, keeping its files (copied to the real one)."""
    saved = Path(f"{mount}.saved-{uuid.uuid4().hex[:6]}")
    shutil.copytree(mount, saved, ignore=shutil.ignore_patterns("filler"))
    subprocess.run(["umount", "-l", str(mount)], check=True)
    for item in saved.iterdir():
        shutil.move(str(item), str(mount / item.name))
    saved.rmdir()


def unmount_stale_fillers(prefix: str) -> None:
    """A killed run leaves its tmpfs over a backup directory of a `prefix`-* namespace: unmount it."""
    for mount in tmpfs_mounts(oh.HOSTPATH_BASE / "backups"):
        if mount.parent.name.startswith(f"{prefix}-"):
            unmount(mount)


def fill_backup_volume(ns: str, name: str) -> Path:
    """Put a tmpfs with room for the backups already there plus FULL_DISK_HEADROOM over the
    object's backup directory, copy the backups onto it, and fill it to FULL_DISK_LEFT."""
    directory = oh.backup_dir(ns, name)
    used = sum(f.stat().st_size for f in directory.iterdir() if f.is_file())
    saved = directory.rename(f"{directory}.before-fill")
    directory.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={used + FULL_DISK_HEADROOM}", "tmpfs",
                    str(directory)], check=True)
    for item in saved.iterdir():
        shutil.move(str(item), str(directory / item.name))
    saved.rmdir()
    filler = directory / "filler"
    with filler.open("wb") as out:
        while (free := shutil.disk_usage(directory).free) > FULL_DISK_LEFT:
            out.write(b"\0" * min(1 << 20, free - FULL_DISK_LEFT))
            out.flush()
    return filler


# --- objects and rows --------------------------------------------------------------------------

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
    """Exactly one Deployment, Service pair, data and backup claim, data volume, credentials
    and health Secret of the object; no temporary Secret; no Job of it still running; no
    partial dump on its backup volume."""
    def named(kind: str, *args: str) -> list[dict[str, Any]]:
        return [i for i in cluster.get(*args, kind)["items"] if i["metadata"]["name"].startswith(f"{name}-")
                or i["metadata"]["name"] == name]

    def names(items: list[dict[str, Any]]) -> list[str]:
        return sorted(i["metadata"]["name"] for i in items)

    assert names(named("deployments", "-n", ns)) == [name]
    assert names(named("services", "-n", ns)) == [name, f"{name}-direct"]
    assert names(named("persistentvolumeclaims", "-n", ns)) == [f"{name}-backup", f"{name}-data"]
    assert names(named("secrets", "-n", ns)) == [f"{name}-credentials", f"{name}-health"]
    running = [j["metadata"]["name"] for j in named("jobs", "-n", ns) if j.get("status", {}).get("active")]
    assert running == [], f"Jobs of {name} still running after it converged: {running}"
    data = [v["metadata"]["name"] for v in cluster.get("pv")["items"]
            if v["metadata"]["name"].startswith(f"mysql-data-{ns}-{name}-")
            and not v["metadata"].get("deletionTimestamp")]
    assert len(data) == 1, data
    if cluster.local:
        assert list(oh.backup_dir(ns, name).glob(".*.partial")) == []


class Rows:
    """What one object must hold: ROWS rows in t, the marker rows so far, and (from the
    server-kill stages on) BIG_ROWS rows in big."""

    def __init__(self, server: oh.Server) -> None:
        self.server = server
        self.markers: list[str] = []
        self.big = False

    def mark(self, cluster: harness.Cluster, ns: str, name: str, stage: str) -> None:
        self.markers.append(f"{stage}-{uuid.uuid4().hex[:6]}")
        sql(cluster, ns, name, self.server, f"INSERT INTO marks (v) VALUES ('{self.markers[-1]}');")

    def count(self, cluster: harness.Cluster, ns: str, name: str) -> None:
        big = "SELECT COUNT(*) FROM big; " if self.big else ""
        out = sql(cluster, ns, name, self.server, f"SELECT COUNT(*) FROM t; {big}SELECT v FROM marks ORDER BY id;")
        lines = out.strip().splitlines()
        expected = [str(ROWS), *([str(BIG_ROWS)] if self.big else []), *self.markers]
        assert lines == expected, out
        Stats.rows_checked += ROWS + len(self.markers) + (BIG_ROWS if self.big else 0)


def latest_backup(cluster: harness.Cluster, ns: str, name: str) -> str:
    claim = cluster.get("-n", ns, "pvc", f"{name}-backup")
    return str(claim["metadata"].get("annotations", {}).get("otus.homework/latest-backup", ""))


def assert_complete_backup(ns: str, name: str, file: str, rows: Rows) -> None:
    """The file on the backup volume (read on the node) ends with the dump's completion
    trailer and holds the latest marker row."""
    text = (oh.backup_dir(ns, name) / file).read_text(errors="replace")
    assert text.rstrip("\n").splitlines()[-1].startswith("-- Dump completed"), text[-300:]
    assert rows.markers[-1] in text


def wait_gone(cluster: harness.Cluster, ns: str, timeout: float = 600) -> None:
    cluster.wait_for(lambda: cluster.get("-n", ns, "mysqls.otus.homework")["items"] == [], timeout=timeout,
                     what="the deleted objects to go", interval=2)


# --- the scenario --------------------------------------------------------------------------------

class Scenario:
    """The two objects (one per server image) and what each must hold, stage by stage. A
    module runs the stages it is about, in order (each stage starts where the one before it
    left the objects); `second` is the operator that runs beside the first one, if any."""

    def __init__(self, cluster: harness.Cluster, ns: str, operator: harness.Operator,
                 second: harness.Operator | None = None) -> None:
        self.cluster, self.ns, self.operator, self.second = cluster, ns, operator, second
        self.rng = random.Random(SEED)
        self.names = {server.key: server.name("fault") for server in SERVERS}
        self.rows = {server.key: Rows(server) for server in SERVERS}

    def each(self) -> Iterator[tuple[oh.Server, str, Rows]]:
        for server in SERVERS:
            yield server, self.names[server.key], self.rows[server.key]

    def check(self, stage: str) -> None:
        """One of each child, a marker row for `stage`, then every row counted."""
        for _, name, held in self.each():
            assert_one_of_each(self.cluster, self.ns, name)
            held.mark(self.cluster, self.ns, name, stage)
            held.count(self.cluster, self.ns, name)

    def converge(self) -> None:
        converge(self.cluster, self.ns, self.operator, list(self.names.values()))

    def delete(self, name: str) -> None:
        self.cluster.kubectl("-n", self.ns, "delete", "mysqls.otus.homework", name, "--wait=false")

    def patch(self, name: str, spec: dict[str, str]) -> None:
        self.cluster.kubectl("-n", self.ns, "patch", "mysqls.otus.homework", name, "--type=merge",
                             "-p", json.dumps({"spec": spec}))

    def backup_completed(self, name: str) -> bool:
        """The object's backup Job succeeded (or the object is gone already)."""
        job = self.cluster.kubectl("-n", self.ns, "get", "job", f"{name}-backup", "-o", "json", check=False)
        if job.returncode != 0:
            return False
        if self.cluster.kubectl("-n", self.ns, "get", "mysqls.otus.homework", name, check=False).returncode != 0:
            return True
        return bool(json.loads(job.stdout).get("status", {}).get("succeeded"))

    def latest(self) -> dict[str, str]:
        return {name: latest_backup(self.cluster, self.ns, name) for _, name, _ in self.each()}

    def create_with_rows(self, *, kill: bool) -> None:
        """Create, the operator killed at a random moment of it (`kill`); then the rows."""
        self.create()
        if kill:
            kill_at_random(self.operator, self.rng, "the create")
        self.converge()
        values = ", ".join(f"({i}, 'row-{i}')" for i in range(ROWS))
        for server, name, _ in self.each():
            sql(self.cluster, self.ns, name, server,
                "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40)); "
                "CREATE TABLE marks (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(40)); "
                f"INSERT INTO t VALUES {values};")
        self.check("created")

    def create_killing_the_operator(self) -> None:
        """Create, the operator killed at a random moment of it."""
        self.create_with_rows(kill=True)

    def create(self) -> None:
        for server, name, _ in self.each():
            self.cluster.apply(oh.mysql_object(name, self.ns, image=server.image))

    def create_and_write(self) -> None:
        """Create (no fault: the stages after this one are the module's faults), then the rows."""
        self.create_with_rows(kill=False)

    def rotate_killing_the_operator(self) -> None:
        """Password rotation, the operator killed at a random moment of it: the new password
        works (the SQL Jobs read it from the Secret), the rows are all there."""
        for _, name, _ in self.each():
            self.patch(name, {"password": f"rotated-{uuid.uuid4().hex[:8]}"})
        kill_at_random(self.operator, self.rng, "the password rotation")
        self.converge()
        self.check("rotated")

    def change_image_with_two_operators(self) -> None:
        """Image change with a second operator running at once on the same objects, the first
        one killed at a random moment: the server rolls to the new image, rows kept."""
        assert self.second is not None
        self.second.start()
        for server, name, _ in self.each():
            self.patch(name, {"image": alias(server.image)})
        kill_at_random(self.operator, self.rng, "the image change")
        self.converge()
        for server, name, _ in self.each():
            deployment = self.cluster.get("-n", self.ns, "deployment", name)
            assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == alias(server.image)
        self.check("image-changed")

    def wait_backup_jobs(self) -> None:
        """Until each object's backup Job exists (or every object is gone already)."""
        self.cluster.wait_for(lambda: all(
            self.cluster.kubectl("-n", self.ns, "get", "job", f"{name}-backup", check=False).returncode == 0
            for name in self.names.values()) or self.cluster.get("-n", self.ns, "mysqls.otus.homework")["items"] == [],
            timeout=300, what="the backup Jobs to start", interval=1)

    def assert_backed_up_and_gone(self) -> None:
        wait_gone(self.cluster, self.ns)
        for _, name, held in self.each():
            assert_complete_backup(self.ns, name, latest_backup(self.cluster, self.ns, name), held)

    def assert_restored(self, stage: str) -> None:
        for _, name, _ in self.each():
            restore = self.cluster.get("-n", self.ns, "job", f"{name}-restore")
            assert restore["status"].get("succeeded") == 1, restore["status"]
        self.check(stage)

    def delete_with_two_operators_killing(self) -> None:
        """Delete, both operators running, the first one killed while the backup Jobs run:
        the objects still go only with a complete backup, and the record names the file the
        completed Job wrote."""
        for _, name, _ in self.each():
            self.delete(name)
        self.wait_backup_jobs()
        kill_at_random(self.operator, self.rng, "the backup Jobs")
        self.assert_backed_up_and_gone()

    def recreate_with_two_operators_killing(self) -> None:
        """Re-create, both operators running, the first one killed at a random moment of it:
        the restore brings every row back; then the second operator stops, having leaked
        nothing."""
        assert self.second is not None
        self.create()
        kill_at_random(self.operator, self.rng, "the re-create and restore")
        self.converge()
        self.assert_restored("restored")
        self.second.stop()
        assert oh.leaks(self.cluster, self.ns, self.second) == []

    def delete_freezing(self) -> None:
        """Delete, the API server frozen for 30 s during it: the objects go, each only with a
        complete backup."""
        for _, name, _ in self.each():
            self.delete(name)
        time.sleep(self.rng.uniform(0.3, 4.0))
        freeze_apiserver("the delete")
        self.assert_backed_up_and_gone()

    def recreate_freezing(self) -> None:
        """Re-create, the API server frozen for 30 s meanwhile: the restore brings every row
        back."""
        self.create()
        time.sleep(self.rng.uniform(0.3, 4.0))
        freeze_apiserver("the re-create and restore")
        self.converge()
        self.assert_restored("restored")

    def delete_killing_the_server_mid_dump(self) -> None:
        """Delete with the server killed while the backup Job's dump runs (a big table
        makes the dump long enough to be caught mid-way): the failed dump is never recorded;
        the Job's retry, once the server is back, takes the backup that is recorded. The
        operator is killed right after the Jobs completed, before it records them: the
        restarted finalizer takes and records a complete backup all the same."""
        for server, name, held in self.each():
            sql(self.cluster, self.ns, name, server,
                "CREATE TABLE big (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(200)); "
                "INSERT INTO big (v) VALUES (REPEAT('x', 200)); "
                + "INSERT INTO big (v) SELECT v FROM big; " * 17)
            held.big = True
        self.check("big")
        before = self.latest()
        for _, name, _ in self.each():
            self.delete(name)
            seen = kill_servers_during(self.cluster, self.ns, "mysqldump", {name: dump_in_progress(self.ns, name)})
            print(f"  killed the server of {name} during its dump ({seen[name]})")
        self.cluster.wait_for(lambda: all(self.backup_completed(name) for name in self.names.values()),
                              timeout=600, what="the retried backup Jobs to complete", interval=0.5)
        kill_operator(self.operator, "the finalizers, right after the backup Jobs completed")
        wait_gone(self.cluster, self.ns)
        for _, name, held in self.each():
            assert latest_backup(self.cluster, self.ns, name) != before[name]
            assert_complete_backup(self.ns, name, latest_backup(self.cluster, self.ns, name), held)
            print(f"  backup Job of {name}: {self.cluster.get('-n', self.ns, 'job', f'{name}-backup')['status']}")

    def recreate_killing_the_server_mid_restore(self) -> None:
        """Re-create with the server killed while the restore Job loads the backup: the
        restore is retried and completes; never Successful on partial data."""
        self.create()
        seen = kill_servers_during(self.cluster, self.ns, "mysql",
                                   {name: load_in_progress(self.ns, name) for _, name, _ in self.each()})
        for name, what in seen.items():
            print(f"  killed the server of {name} during its restore ({what})")
        self.converge()
        for _, name, _ in self.each():
            restore = self.cluster.get("-n", self.ns, "job", f"{name}-restore")["status"]
            assert restore.get("failed", 0) >= 1 and restore.get("succeeded") == 1, restore
        self.check("restored-after-kill")

    def delete_with_a_full_backup_volume(self) -> None:
        """Delete with the backup volume full, the operator killed right after the delete,
        before the backup Jobs: the backup fails loudly (object kept, Failure condition,
        Warning Event naming the kept backup), the previous backup stays the latest; once
        there is room the retried backup completes and the object goes."""
        before = self.latest()
        fillers = [fill_backup_volume(self.ns, name) for _, name, _ in self.each()]
        for _, name, _ in self.each():
            self.delete(name)
        kill_operator(self.operator, "the delete, before the backup Jobs", self.rng.uniform(0.0, 0.3))
        for _, name, _ in self.each():
            def reported(name: str = name) -> bool:
                return any(e["reason"] == "FinalizeFailed" and before[name] in e["message"]
                           for e in oh.warnings_about(self.cluster, self.ns, name))
            self.cluster.wait_for(reported, timeout=600, what=f"the failed backup of {name} to be reported",
                                  interval=2)
            failure = oh.condition(self.cluster.get("-n", self.ns, "mysqls.otus.homework", name), "Failure") or {}
            assert failure.get("status") == "True" and "backup" in failure.get("message", ""), failure
            assert latest_backup(self.cluster, self.ns, name) == before[name]
            assert list(oh.backup_dir(self.ns, name).glob(".*.partial")) == []
            Stats.full_disks += 1
        for filler in fillers:
            filler.unlink()
        wait_gone(self.cluster, self.ns)
        for _, name, held in self.each():
            assert latest_backup(self.cluster, self.ns, name) != before[name]
            assert_complete_backup(self.ns, name, latest_backup(self.cluster, self.ns, name), held)
            assert (oh.backup_dir(self.ns, name) / before[name]).exists()
            unmount(oh.backup_dir(self.ns, name))


def alias(image: str) -> str:
    """The second tag of a local image (tagged in the node's containerd on first use)."""
    name = ALIASES.get(image)
    if name is None:
        pytest.skip(f"no second tag for {image}: the image change needs one of {sorted(ALIASES)}")
    ctr = ["ctr", "--address", str(oh.LOCAL_NODE_SOCKET), "--namespace", "k8s.io"]
    if name not in subprocess.run([*ctr, "images", "ls", "-q"], capture_output=True, text=True,
                                  check=True).stdout.split():
        subprocess.run([*ctr, "images", "tag", image, name], check=True, capture_output=True)
    return name
