"""What an application writing to the database sees during day-2 operations, on both server
images at once (one object each, one namespace, one operator).

A writer pod (the server image's own client, Pod Security "restricted") inserts one row
per attempt, about every 100 ms, each over a fresh connection through the instance's
Service as root: a sequence number, acknowledged when the client exits 0. It holds every
password the test will use, in order, from a Secret (environment variables, so no edit
has to reach a mounted file first), keeps to the one that worked last, and when that one
is refused tries the others, newest first. Meanwhile, with steady writing between them:
1. rotation by spec: spec.password changed, until the new generation is Successful;
2. rotation by Secret: the object switched to spec.passwordSecretRef (a change of source,
   itself a rotation), then that Secret's password edited and a run started by a hand edit
   of a field the role wrote on the Service <name> (a label: the dependent watch ignores
   fields no run wrote, such as a new annotation), until <name>-credentials holds it;
3. a change of server options a running server takes (spec.config max_connections and
   long_query_time), until the new generation is Successful and the server has them;
4. an on-demand MySQLBackup, until Complete and Verified;
5. the operator SIGKILLed and started again, its resumed runs, then ~10 s of nothing.
Then: every acknowledged row is in the table (no acknowledged write lost), no Secret value
appears outside its Secret, and the server pod is the one it was at the start, never
restarted; all three are checked before the test fails on any.

Outcomes are asserted, never timings: the longest run of failed writes within each
operation's window (from its start to the next one's) is printed, one figures line per
image (tests/availability.py computes it), with each failed write and its reason. Epoch milliseconds of the test and of the writer
are compared, so the writer's node shares the test's clock (the local cluster's is this host).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import kubernetes
import pytest

from tests import availability, figures, harness, kube
from tests.integration import operator_harness as oh

NAMESPACE_PREFIX = "avail"  # its namespace and operator: tests/integration/conftest.py
SERVERS = oh.SERVERS
DATABASE = "otus-database"
STEADY = 30  # acknowledged writes in a row: steady writing again after an operation
NOOP_WAIT = 10.0  # seconds of nothing after the operator's restart
# The passwords, in the order the test uses them: the object's first spec.password, the
# rotated one, the referenced Secret's first value, its edited value.
STEPS = ("first", "by-spec", "ref-first", "ref-edited")
WRITER_LABEL = "otus.homework/availability-writer"
MAX_SHOWN = 40  # failed writes printed per image
TOUCHED_LABEL = "app.kubernetes.io/managed-by"  # a label the role writes on the Service, put back by its run

# The writer: PW0..PW<COUNT-1> in the order the test uses them; HOST, DATABASE. Each attempt
# is a new client process (a fresh connection); `timeout` bounds one that hangs on a server
# going away. `/tmp/stop` (the test's `kubectl exec touch`) ends the loop.
WRITER = r"""
set -u
newest=$((COUNT - 1)); cur=0; err=""; rc=0
password() { eval "printf '%s' \"\$PW$1\""; }
run() {  # run <password index> <sql>
  err=$(MYSQL_PWD=$(password "$1") timeout 10 mysql -h "$HOST" -P 3306 -uroot --connect-timeout=3 \
        --batch "$DATABASE" -e "$2" 2>&1 >/dev/null)
  rc=$?
  return $rc
}
denied() { case $err in *"ERROR 1045"*) return 0 ;; esac; return 1; }
attempt() {  # attempt <sql>: with the password that worked last; refused, the others, newest first
  run "$cur" "$1" && return 0
  denied || return 1
  k=$newest
  while [ "$k" -ge 0 ]; do
    if [ "$k" -ne "$cur" ]; then
      if run "$k" "$1"; then cur=$k; return 0; fi
      denied || return 1
    fi
    k=$((k - 1))
  done
  return 1
}
reason() {
  line=$(printf '%s\n' "$err" | grep -v 'Warning' | head -n 1 | cut -c 1-80)
  [ "$rc" -eq 124 ] && line="timeout (10 s)"
  printf '%s' "${line:-exit $rc}"
}
tries=0
until attempt "CREATE TABLE IF NOT EXISTS avail (seq INT PRIMARY KEY, at TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP(3))"; do
  tries=$((tries + 1))
  if [ "$tries" -ge 120 ]; then echo "no table: $(reason)"; exit 1; fi
  sleep 1
done
echo "table ready"
seq=0
while [ ! -e /tmp/stop ]; do
  seq=$((seq + 1)); at=$(date +%s%3N)
  if attempt "INSERT INTO avail (seq) VALUES ($seq)"; then echo "$seq $at ok pw$cur"
  else echo "$seq $at fail $(reason)"; fi
  sleep 0.1
done
echo "stopped after $seq attempts"
"""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def explain(explain: None, request: pytest.FixtureRequest, cluster: harness.Cluster,
            op_namespace: str) -> Iterator[None]:
    """On failure, also the end of each writer's log (then conftest's `explain`: the
    namespace's objects, events and the operator log)."""
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(cluster.kubectl("-n", op_namespace, "logs", "-l", f"{WRITER_LABEL}=true", "--prefix",
                              "--tail=20", check=False).stdout)


@dataclass
class Instance:
    """One server image's object, its writer and what the test saw of them."""

    cluster: harness.Cluster
    ns: str
    operator: harness.Operator
    server: oh.Server
    passwords: dict[str, str] = field(default_factory=lambda: {s: f"{s}-{uuid.uuid4().hex[:16]}" for s in STEPS})
    operations: list[tuple[str, int, int]] = field(default_factory=list)  # (name, start, end) epoch-ms
    pods: list[tuple[str, list[tuple[str, int]]]] = field(default_factory=list)  # (after what, [(uid, restarts)])
    log: str = ""
    stopped_ms: int = 0

    @property
    def name(self) -> str:
        return self.server.name("avail")

    @property
    def writer(self) -> str:
        return f"{self.name}-writer"

    @property
    def ref(self) -> str:
        return f"{self.name}-root"

    def say(self, what: str) -> None:
        print(f"  {self.name}: {what}", flush=True)

    # --- reading ---

    def attempts(self) -> list[availability.Attempt]:
        return availability.parse(self.log or self.cluster.job_logs(self.ns, self.writer))

    def credentials_hold(self, step: str) -> bool:
        data = self.cluster.get("-n", self.ns, "secret", f"{self.name}-credentials").get("data") or {}
        return base64.b64decode(data.get("password", "")).decode() == self.passwords[step]

    def note_pods(self, after: str) -> None:
        """The server pods now (uid, restarts), for the check that none was replaced or restarted."""
        pods = self.cluster.get("-n", self.ns, "pods", "-l", f"app={self.name}")["items"]
        self.pods.append((after, sorted(
            (p["metadata"]["uid"], sum(c.get("restartCount", 0) for c in p["status"].get("containerStatuses") or []))
            for p in pods)))

    def wait_steady(self, after: str, since_ms: int) -> None:
        """Wait until whatever changed the server's Deployment has rolled out and the writer
        has had STEADY acknowledged writes in a row since `since_ms`; note the pods."""
        oh.wait_ready(self.cluster, self.ns, self.name)

        def steady() -> bool:
            if self.cluster.get("-n", self.ns, "job", self.writer).get("status", {}).get("failed"):
                raise AssertionError(f"the writer {self.writer} failed:\n"
                                     f"{self.cluster.job_logs(self.ns, self.writer)[-3000:]}")
            return availability.steady(self.attempts(), since_ms, STEADY)

        self.cluster.wait_for(steady, timeout=420, interval=1,
                              what=f"{self.name}'s writer to write steadily again after {after}")
        self.note_pods(after)

    def operation(self, what: str, start_ms: int) -> None:
        end = now_ms()
        self.operations.append((what, start_ms, end))
        self.say(f"{what}: {start_ms} to {end} epoch-ms ({(end - start_ms) / 1000:.1f} s)")
        self.wait_steady(what, end)

    # --- the steps ---

    def patch_spec(self, spec: dict[str, Any]) -> int:
        """Merge `spec` into the object's (with the client: no password on a command line);
        the object's new generation."""
        patched = self.cluster.custom.patch_namespaced_custom_object(
            "otus.homework", "v1", self.ns, "mysqls", self.name, {"spec": spec},
            _content_type="application/merge-patch+json")
        return int(cast("dict[str, Any]", patched)["metadata"]["generation"])

    def create(self) -> None:
        self.cluster.apply(oh.mysql_object(self.name, self.ns, image=self.server.image,
                                           password=self.passwords["first"]))
        oh.wait_successful(self.cluster, self.ns, self.name, self.operator)
        oh.wait_ready(self.cluster, self.ns, self.name)
        self.cluster.wait_for(lambda: oh.ready_condition(self.cluster, self.ns, self.name).get("status") == "True",
                              timeout=120, what=f"{self.name} to be Ready", interval=2)
        self.note_pods("the create")

    def start_writer(self) -> None:
        self.cluster.core.create_namespaced_secret(self.ns, kubernetes.client.V1Secret(
            metadata=kubernetes.client.V1ObjectMeta(name=f"{self.writer}-passwords"),
            string_data={f"p{i}": self.passwords[step] for i, step in enumerate(STEPS)}))
        env: list[dict[str, Any]] = [
            {"name": "HOST", "value": self.name}, {"name": "DATABASE", "value": DATABASE},
            {"name": "COUNT", "value": str(len(STEPS))},
            *({"name": f"PW{i}", "valueFrom": {"secretKeyRef": {"name": f"{self.writer}-passwords", "key": f"p{i}"}}}
              for i in range(len(STEPS)))]
        self.cluster.apply(kube.shell_job(self.ns, self.writer, WRITER, env=env, image=self.server.image,
                                          labels={WRITER_LABEL: "true"}))
        self.wait_steady("the writer's start", 0)
        self.say("the writer writes steadily")

    def rotate_by_spec(self) -> None:
        start = now_ms()
        generation = self.patch_spec({"password": self.passwords["by-spec"]})
        oh.wait_successful(self.cluster, self.ns, self.name, self.operator, generation=generation)
        assert self.credentials_hold("by-spec"), f"{self.name}-credentials does not hold the rotated password"
        self.operation("rotation-by-spec", start)

    def rotate_by_secret(self) -> None:
        start = now_ms()
        self.cluster.core.create_namespaced_secret(self.ns, kubernetes.client.V1Secret(
            metadata=kubernetes.client.V1ObjectMeta(name=self.ref),
            string_data={"password": self.passwords["ref-first"]}))
        generation = self.patch_spec({"password": None, "passwordSecretRef": {"name": self.ref}})
        oh.wait_successful(self.cluster, self.ns, self.name, self.operator, generation=generation)
        assert self.credentials_hold("ref-first"), f"{self.name}-credentials does not hold the referenced password"
        self.say("switched to spec.passwordSecretRef")
        self.wait_steady("the switch to spec.passwordSecretRef", now_ms())  # two rotations, not one
        # The user edits the Secret; no watch sees it. A hand edit of a field the role wrote
        # on a child (a label of the Service) runs the role, which rotates, then puts the label back.
        self.cluster.core.patch_namespaced_secret(self.ref, self.ns, {"stringData": {"password": self.passwords["ref-edited"]}},
                                                  _content_type="application/merge-patch+json")
        nudged = harness.now_utc()
        self.cluster.kubectl("-n", self.ns, "label", "service", self.name, "--overwrite",
                             f"{TOUCHED_LABEL}=availability-test")

        def rotated() -> bool:
            if not self.operator.alive():
                raise AssertionError(f"the operator exited:\n{self.operator.log()[-6000:]}")
            runs = [s for s in self.operator.summaries() if s.kind.endswith("/MySQL") and s.name == self.name
                    and s.status == "successful" and s.finished_at > nudged]
            return bool(runs) and self.credentials_hold("ref-edited")

        self.cluster.wait_for(rotated, timeout=420, interval=2,
                              what=f"a run of {self.name} to rotate to the edited Secret's password")
        labels = self.cluster.get("-n", self.ns, "service", self.name)["metadata"].get("labels") or {}
        assert labels.get(TOUCHED_LABEL) == "mysql-operator", labels
        self.operation("rotation-by-secret", start)

    def change_config(self) -> None:
        start = now_ms()
        generation = self.patch_spec({"config": {"max_connections": 210, "long_query_time": "2.5"}})
        oh.wait_successful(self.cluster, self.ns, self.name, self.operator, generation=generation)
        out = oh.sql_job(self.cluster, self.ns, self.name, DATABASE,
                         "SELECT @@GLOBAL.max_connections, @@GLOBAL.long_query_time;",
                         secret=f"{self.name}-credentials", image=self.server.image)
        assert out.split() == ["210", "2.500000"], out
        self.operation("config-live", start)

    def back_up(self) -> None:
        start = now_ms()
        backup = f"{self.name}-now"
        self.cluster.apply(json.dumps({"apiVersion": "otus.homework/v1", "kind": "MySQLBackup",
                                       "metadata": {"name": backup, "namespace": self.ns},
                                       "spec": {"instance": self.name, "verify": True}}))
        found: dict[str, Any] = {}

        def decided() -> bool:
            obj = self.cluster.get("-n", self.ns, "mysqlbackups.otus.homework", backup)
            verified = (oh.condition(obj, "Verified") or {}).get("status")
            found.update(obj)
            state = obj.get("status", {}).get("state")
            return state == "Failed" or (state == "Complete" and verified in ("True", "False"))

        self.cluster.wait_for(decided, timeout=600, what=f"MySQLBackup {backup} to be decided", interval=1)
        assert found["status"]["state"] == "Complete", found["status"]
        assert (oh.condition(found, "Verified") or {}).get("status") == "True", oh.condition(found, "Verified")
        self.operation("backup", start)

    def stop_writer(self) -> None:
        pods = self.cluster.get("-n", self.ns, "pods", "-l", f"job-name={self.writer}")["items"]
        assert len(pods) == 1 and pods[0]["status"].get("phase") == "Running", \
            [(p["metadata"]["name"], p["status"].get("phase")) for p in pods]
        self.stopped_ms = now_ms()
        self.cluster.kubectl("-n", self.ns, "exec", pods[0]["metadata"]["name"], "--", "touch", "/tmp/stop")
        self.cluster.wait_job(self.ns, self.writer, timeout=120)
        self.log = self.cluster.job_logs(self.ns, self.writer)
        self.note_pods("the end")

    def rows(self) -> set[int]:
        out = oh.sql_job(self.cluster, self.ns, self.name, DATABASE, "SELECT seq FROM avail ORDER BY seq;",
                         secret=f"{self.name}-credentials", image=self.server.image)
        return {int(line) for line in out.split()}

    # --- the outcome ---

    def figures(self) -> str:
        starts = [start for _, start, _ in self.operations] + [self.stopped_ms]
        windows = [availability.Window(what, start, starts[i + 1])
                   for i, (what, start, _) in enumerate(self.operations)]
        return availability.figures_line(f"{self.server.key} ({self.server.image})", self.attempts(), windows)

    def replaced_or_restarted(self) -> list[str]:
        """Where the server pod differed from the one after the create (replaced, more than
        one, or restarted)."""
        (_, first), *later = self.pods
        problems = [f"{self.name}: the server pod was not one ({first}) after the create"] if len(first) != 1 else []
        problems += [f"{self.name}: after {after}: server pods {pods} (uid, restarts), not {first}"
                     for after, pods in later if pods != first]
        problems += [f"{self.name}: after the create: restarted {restarts} times"
                     for _, restarts in first if restarts]
        return problems


def kill_the_operator(operator: harness.Operator, instances: dict[str, Instance]) -> None:
    """SIGKILL the operator's process group, start it again, wait for its resumed runs of the
    objects, then NOOP_WAIT s of nothing; one window for every instance."""
    start = now_ms()
    print(f"  killing the operator (pid {operator.pid})", flush=True)
    os.killpg(operator.pid, signal.SIGKILL)
    assert operator.process is not None
    operator.process.wait(timeout=30)
    operator.start()
    for instance in instances.values():
        def resumed(name: str = instance.name) -> bool:
            return any(s.kind.endswith("/MySQL") and s.name == name and s.action == "reconcile"
                       for s in operator.summaries(since_start=True))
        instance.cluster.wait_for(resumed, timeout=300, what=f"the restarted operator's run of {instance.name}")
    runs = [s for s in operator.summaries(since_start=True) if s.kind.endswith("/MySQL")]
    assert all(s.status == "successful" for s in runs), [s.sentence() for s in runs]
    time.sleep(NOOP_WAIT)
    end = now_ms()
    for instance in instances.values():
        instance.operations.append(("operator-kill", start, end))
        instance.say(f"operator-kill: {start} to {end} epoch-ms ({(end - start) / 1000:.1f} s)")
    oh.for_each_server(lambda server: instances[server.key].wait_steady("operator-kill", end))


@pytest.mark.usefixtures("explain")
def test_writes_are_acknowledged_and_kept_and_the_server_stays_up_through_day_2_operations(
        cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:
    instances = {server.key: Instance(cluster, op_namespace, operator, server) for server in SERVERS}

    def each(step: str) -> None:
        print(f"{step.replace('_', ' ')}", flush=True)
        oh.for_each_server(lambda server: getattr(instances[server.key], step)())

    for step in ("create", "start_writer", "rotate_by_spec", "rotate_by_secret", "change_config", "back_up"):
        each(step)
    print("operator kill", flush=True)
    kill_the_operator(operator, instances)
    each("stop_writer")

    for instance in instances.values():
        measured = instance.figures()
        print(measured)
        figures.measured(measured)
        failed = [a for a in instance.attempts() if not a.ok]
        for attempt in failed[:MAX_SHOWN]:
            print(f"  {instance.name} failed write {attempt.seq} at {attempt.at_ms}: {attempt.reason}")
        if len(failed) > MAX_SHOWN:
            print(f"  {instance.name}: {len(failed) - MAX_SHOWN} more failed writes")
    rows: dict[str, set[int]] = {}
    oh.for_each_server(lambda server: rows.update({server.key: instances[server.key].rows()}))
    # every check made before any is asserted: one failure says all that went wrong
    problems: list[str] = []
    for key, instance in instances.items():
        acknowledged = availability.acknowledged(instance.attempts())
        missing = sorted(acknowledged - rows[key])
        figures.add("rows checked", len(acknowledged))
        if not acknowledged:
            problems.append(f"{instance.name}: no write acknowledged")
        if missing:
            problems.append(f"{instance.name}: {len(missing)} of {len(acknowledged)} acknowledged rows lost: {missing[:20]}")
    if not operator.alive():
        problems.append(f"the operator exited:\n{operator.log()[-4000:]}")
    problems += [f"leak: {leak}" for leak in oh.leaks(cluster, op_namespace, operator)]
    problems += [problem for instance in instances.values() for problem in instance.replaced_or_restarted()]
    assert problems == [], "\n".join(problems)
