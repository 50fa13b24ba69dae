"""What the operator tests share: how they start the operator (`python -m ansible_kopf`, a
real process against a real cluster: tests/harness.py's Operator) and the MySQL side:
objects, conditions, SQL through Jobs, the namespaces and volumes they leave."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests import api_warnings, figures, harness, kube

REPO = harness.REPO
MYSQL_IMAGE = kube.MYSQL_IMAGE
HOSTPATH_BASE = Path("/var/lib/mysql-operator")  # the mysql role's mysql_hostpath_base
LOCAL_NODE_SOCKET = Path("/var/lib/otus-cluster/containerd/containerd.sock")  # cluster/cluster.sh's


@dataclass(frozen=True)
class Server:
    """A server image the server-facing tests run against (kube.SERVER_IMAGES)."""

    key: str
    image: str

    def name(self, base: str) -> str:
        """An object name of this image's run of a test (the two runs share one namespace)."""
        return f"{base}-{self.key[:2]}"


SERVERS = [Server(key=key, image=image) for key, image in sorted(kube.SERVER_IMAGES.items())]


def for_each_server(action: Callable[[Server], None]) -> None:
    """Run `action` for every server image at once, one thread each (the objects share the
    namespace and the operator, which reconciles them side by side); re-raise the first
    failure, after printing any other."""
    errors: list[BaseException] = []

    def run(server: Server) -> None:
        try:
            action(server)
        except BaseException as e:  # re-raised below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(server,), name=server.key) for server in SERVERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for other in errors[1:]:
        print(f"also failed: {other!r}")
    if errors:
        raise errors[0]


SESSION_VAR = "OTUS_TEST_SESSION"  # in a test operator's environment: the pytest process that started it
_orphans_stopped = False


def stop_orphaned_operators() -> list[int]:
    """Stop the operators a killed test run left behind (each runs in a session of its own,
    so it outlives pytest): processes on this host whose SESSION_VAR names a process that
    is gone. Their whole process group goes (the operator, its Ansible runs); their warm
    servers follow their parent. Returns the pids stopped."""
    stopped = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        starter = next((v.split(b"=", 1)[1] for v in environ if v.startswith(SESSION_VAR.encode() + b"=")), b"")
        if not starter.isdigit() or int(starter) == os.getpid() or Path(f"/proc/{int(starter)}").exists():
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(int(entry.name)), signal.SIGKILL)
            stopped.append(int(entry.name))
    return stopped


@dataclass
class ScannedOperator(harness.Operator):
    """An operator whose log is scanned for the API server's warnings (tests/api_warnings.py)
    each time a test stops it: what was written since the last scan, so that the lines of a
    run a test killed and restarted are read once, at the next stop."""

    scanned: int = 0  # bytes of the log read so far

    def stop(self) -> None:
        super().stop()
        try:
            written = self.log_path.read_bytes()[self.scanned:]
        except FileNotFoundError:  # never started
            return
        self.scanned += len(written)
        api_warnings.from_operator_log(written.decode(errors="replace"), str(self.log_path))


def start_operator(cluster: harness.Cluster, namespace: str, workdir: Path,
                   watches: Path | None = None, start: bool = True,
                   extra_env: dict[str, str] | None = None,
                   account: harness.Cluster | None = None) -> harness.Operator:
    """The operator watching `namespace`, its runner artifacts and log (operator.log) in
    `workdir`; running unless `start` is false; `extra_env` added to its environment; with
    the credentials of `account` (shipped_rbac), else of `cluster`."""
    global _orphans_stopped  # noqa: PLW0603 - once per test session
    if not _orphans_stopped:
        stopped = stop_orphaned_operators()
        if stopped:
            print(f"stopped {len(stopped)} operator processes a killed test run left: {stopped}")
        sweep_rbac_copies(cluster)
        _orphans_stopped = True
    env = dict(os.environ)
    env.update({
        SESSION_VAR: str(os.getpid()),
        "KUBECONFIG": (account or cluster).kubeconfig,
        "WATCH_NAMESPACE": namespace,
        "WATCHES_FILE": str(watches or REPO / "watches.yaml"),
        "ANSIBLE_KOPF_WORKDIR": str(workdir / "runner"),
        "PYTHONPATH": str(REPO / "operator"),
        # no /metrics unless a test asks: operators of tests running at once share this host
        "METRICS_BIND_ADDRESS": "0",
        **(extra_env or {}),
    })
    operator = ScannedOperator(log_path=workdir / "operator.log", env=env)
    if start:
        operator.start()
    return operator


def seen_role(data: dict[str, str] | None = None) -> str:
    """A test role's tasks: record the run in a ConfigMap `<watched name>-seen` beside the
    watched object, with `data` (values may be templates)."""
    definition: dict[str, Any] = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "{{ ansible_operator_meta.name }}-seen",
                     "namespace": "{{ ansible_operator_meta.namespace }}"},
        **({"data": data} if data else {}),
    }
    task = {"name": "Record the run in a ConfigMap beside the watched one",
            "kubernetes.core.k8s": {"state": "present", "definition": definition}}
    return "---\n" + yaml.safe_dump([task], sort_keys=False)


def role_watches(base: Path, entries: list[dict[str, Any]], roles: dict[str, str]) -> Path:
    """A test role per `roles` item (name: its tasks' YAML) written under `base`/roles, and a
    watches file of `entries` whose `role` names one of them (replaced by its path)."""
    for name, tasks in roles.items():
        (base / "roles" / name / "tasks").mkdir(parents=True)
        (base / "roles" / name / "tasks" / "main.yml").write_text(tasks)
    watches = base / "watches.yaml"
    watches.write_text(yaml.safe_dump([
        {**entry, "role": str(base / "roles" / entry["role"])} if entry.get("role") in roles else entry
        for entry in entries]))
    return watches


@contextlib.contextmanager
def module_namespace(cluster: harness.Cluster, prefix: str) -> Iterator[str]:
    """A namespace `<prefix>-<random>` for one test module, removed (remove_namespace) after."""
    name = cluster.create_namespace(f"{prefix}-{uuid.uuid4().hex[:8]}")
    try:
        yield name
    finally:
        remove_namespace(cluster, name)


SHIPPED_ROLE = REPO / "deploy" / "rbac" / "cluster_role.yaml"  # the cluster-wide install's
OPERATOR_ACCOUNT = "mysql-operator"
RBAC_LABEL = "otus.homework/test-rbac-namespace"  # on the copies of the shipped ClusterRole


def shipped_rbac(cluster: harness.Cluster, namespace: str, workdir: Path) -> harness.Cluster:
    """The operator's credentials as the cluster-wide install has them: the ServiceAccount
    mysql-operator in `namespace` (the first of a list), bound to a copy of the ClusterRole
    deploy/rbac/cluster_role.yaml ships, named after the namespace (the install's own, which
    test_in_cluster applies and removes, is never touched); a kubeconfig with its token in
    `workdir`. remove_namespace removes the copy and its binding."""
    home = namespace.split(",", maxsplit=1)[0]
    name = f"test-{home}-{OPERATOR_ACCOUNT}"
    labels = {RBAC_LABEL: home}
    role = yaml.safe_load(SHIPPED_ROLE.read_text())
    role["metadata"] = {"name": name, "labels": labels}
    objects = [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": OPERATOR_ACCOUNT, "namespace": home}},
        role,
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_ACCOUNT, "namespace": home}]},
    ]
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects))
    return service_account_kubeconfig(cluster, home, OPERATOR_ACCOUNT, workdir / "operator.kubeconfig")


def sweep_dead_owners(cluster: harness.Cluster) -> list[str]:
    """Remove (remove_namespace) the namespaces whose creator on this host is gone: a killed
    run's, whose servers' CPU requests would otherwise fill the node for every later test.
    Returns their names."""
    swept = []
    for item in cluster.get("namespaces", "-l", harness.OWNER_LABEL)["items"]:
        metadata = item["metadata"]
        if not harness.owner_alive(metadata["labels"][harness.OWNER_LABEL]):
            remove_namespace(cluster, metadata["name"])
            swept.append(metadata["name"])
    return swept


def sweep_rbac_copies(cluster: harness.Cluster) -> None:
    """Remove the copies of the shipped ClusterRole (and bindings) whose namespace is gone: a
    killed run's."""
    present = {item["metadata"]["name"] for item in cluster.get("namespaces")["items"]}
    for kind in ("clusterrolebindings", "clusterroles"):
        for item in cluster.get(kind, "-l", RBAC_LABEL)["items"]:
            if item["metadata"]["labels"].get(RBAC_LABEL) not in present:
                cluster.kubectl("delete", kind, item["metadata"]["name"], "--ignore-not-found", check=False)


@contextlib.contextmanager
def operator_in(cluster: harness.Cluster, namespace: str, workdir: Path) -> Iterator[harness.Operator]:
    """The CRD installed and the operator running on `namespace` (start_operator) under the
    RBAC the project ships (shipped_rbac: its ServiceAccount's token, not the admin's),
    stopped after; the objects go with the namespace (remove_namespace drops their
    finalizers)."""
    install_crd(cluster)
    workdir.mkdir(parents=True, exist_ok=True)
    running = start_operator(cluster, namespace, workdir, account=shipped_rbac(cluster, namespace, workdir))
    try:
        yield running
    finally:
        running.stop()


_removing: list[str] = []  # namespaces remove_namespace deleted, their directories still there


def remove_namespace(cluster: harness.Cluster, namespace: str) -> None:
    """Delete `namespace` and what the mysql role keeps outside it: the PersistentVolumes
    labelled with it (the backup volume outlives its object by design) and, when the local
    cluster runs (its node is this host), their directories. The MySQL objects' finalizers
    are dropped first (no operator runs any more; a backup of test data is not wanted), so
    the namespace goes now, and so does one a killed run left Terminating. The namespace
    terminates in the background while the next tests run; its directories go once it has
    gone, in finish_removals (at the end of the session)."""
    for name in cluster.kubectl("-n", namespace, "get", "mysqls.otus.homework", "-o", "name",
                                check=False).stdout.split():
        cluster.kubectl("-n", namespace, "patch", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                        check=False)
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    for kind in ("clusterrolebinding", "clusterrole"):
        cluster.kubectl("delete", kind, "-l", f"{RBAC_LABEL}={namespace}", "--ignore-not-found", check=False)
    cluster.kubectl("delete", "pv", "-l", f"otus.homework/mysql-namespace={namespace}", "--wait=false",
                    check=False)
    _removing.append(namespace)


def finish_removals(cluster: harness.Cluster, timeout: float = 300) -> None:
    """Wait for the namespaces remove_namespace deleted to go, then remove their volumes'
    directories on the node (the local cluster's: this host); one of a namespace still
    there after `timeout` stays, for the next run's cluster-up or a later removal."""
    if not _removing:
        return
    cluster.wait_namespaces_gone(_removing, timeout=timeout)
    present = {item["metadata"]["name"] for item in cluster.get("namespaces")["items"]}
    if LOCAL_NODE_SOCKET.exists():  # the local cluster runs: its node is this host
        for namespace in _removing:
            if namespace not in present:
                for kind in ("data", "backups"):
                    shutil.rmtree(HOSTPATH_BASE / kind / namespace, ignore_errors=True)
    _removing.clear()


def backup_dir(ns: str, name: str) -> Path:
    """The object's backup directory on the local cluster's node (this host)."""
    return HOSTPATH_BASE / "backups" / ns / name


def processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, argv) of every process on this host (the local cluster's node)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            yield int(entry.name), [arg.decode(errors="replace") for arg in argv if arg]


def client_host(argv: list[str]) -> str | None:
    """The server a mysql/mysqldump command line connects to (`--host=h`, `-h h` or `-hh`)."""
    for i, arg in enumerate(argv):
        if arg.startswith("--host="):
            return arg[len("--host="):]
        if arg == "-h" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("-h") and len(arg) > 2 and not arg.startswith("--"):
            return arg[2:]
    return None


def runs_a_statement(argv: list[str]) -> bool:
    """Whether a mysql command line runs a statement of its own (`--execute=`, `-e`) rather
    than reading its standard input (a dump being loaded)."""
    return any(arg == "-e" or arg.startswith("--execute") or (arg.startswith("-e") and not arg.startswith("--"))
               for arg in argv[1:])


def install_crd(cluster: harness.Cluster) -> None:
    cluster.install_crd(REPO / "deploy" / "crd.yml")


def mysql_object(name: str, namespace: str, **spec: Any) -> str:
    """A MySQL object of the tests' defaults. Its backups are not verified unless ``backup``
    says so: verification (a throwaway server per backup) is the subject of test_backups."""
    spec.setdefault("backup", {"verify": False})
    body = {
        "apiVersion": "otus.homework/v1",
        "kind": "MySQL",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"image": MYSQL_IMAGE, "database": "otus-database", "password": "otuspassword",
                 "storage_size": "1Gi", **spec},
    }
    return json.dumps(body)


def seed_pod(cluster: harness.Cluster, ns: str, name: str) -> str:
    """The seed walkthrough's `kubectl get pods -l app=<name> -o jsonpath=...`, verbatim."""
    pods = cluster.kubectl("-n", ns, "get", "pods", "-l", f"app={name}",
                           "-o", "jsonpath={.items[*].metadata.name}").stdout.split()
    assert len(pods) == 1, pods
    return pods[0]


def server_pod(cluster: harness.Cluster, ns: str, name: str) -> tuple[str, int]:
    """The uid of the instance's one server pod and its container's restart count (0 for a
    pod just created, whose status has no container yet)."""
    pod = cluster.get("-n", ns, "pod", seed_pod(cluster, ns, name))
    statuses = pod.get("status", {}).get("containerStatuses") or []
    status = next((s for s in statuses if s["name"] == "mysql"), {})
    return pod["metadata"]["uid"], int(status.get("restartCount", 0))


SEED_PASSWORD = "otuspassword"  # the seed walkthrough's, as in mysql_object


def seed_exec(cluster: harness.Cluster, ns: str, pod: str, sql: str, password: str = SEED_PASSWORD) -> str:
    """The seed walkthrough's `kubectl exec $MYSQLPOD -- mysql -p<password> -e "<sql>" otus-database`."""
    return cluster.kubectl("-n", ns, "exec", pod, "--", "mysql", f"-p{password}", "-e", sql,
                           "otus-database").stdout


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in obj.get("status", {}).get("conditions", []):
        if cond.get("type") == kind:
            return dict(cond)
    return None


def wait_successful(cluster: harness.Cluster, namespace: str, name: str, operator: harness.Operator,
                    timeout: float = 420, generation: int | None = None) -> dict[str, Any]:
    """Wait for Successful=True at the object's current (or the given) generation."""
    found: dict[str, Any] = {}

    def done() -> bool:
        if not operator.alive():
            raise AssertionError(f"the operator exited:\n{operator.log()[-6000:]}")
        obj = cluster.get("-n", namespace, "mysqls.otus.homework", name)
        want = generation or obj["metadata"]["generation"]
        ok = condition(obj, "Successful")
        if ok and ok.get("status") == "True" and obj.get("status", {}).get("observedGeneration") == want:
            found.update(obj)
            return True
        return False

    cluster.wait_for(done, timeout=timeout, what=f"MySQL {namespace}/{name} to be Successful", interval=2)
    return found


def sql_job(cluster: harness.Cluster, namespace: str, host: str, database: str, sql: str,
            secret: str, key: str = "password", user: str = "root", expect_success: bool = True,
            timeout: float = 240, image: str = MYSQL_IMAGE, wait_for_server: bool = False,
            port: int = 3306) -> str:
    """Run `sql` in a Job pod (client of `image`) that connects to `host` by DNS name; return its
    output. `wait_for_server`: the client pings the server first, as an application retries
    (right after a server's restart, kube-proxy may not route to the new pod yet)."""
    name = f"sql-{uuid.uuid4().hex[:8]}"
    manifest = kube.sql_client_job(namespace, name, host, database, sql, secret=secret, key=key,
                                   user=user, labels={"test-client": "true"}, image=image,
                                   wait_for_server=wait_for_server, port=port)
    cluster.apply(manifest)
    if expect_success:
        cluster.wait_job(namespace, name, timeout=timeout)
    else:
        def failed() -> bool:
            status = cluster.get("-n", namespace, "job", name).get("status", {})
            if status.get("succeeded"):
                raise AssertionError(f"job {name} succeeded but should have failed:\n"
                                     f"{cluster.job_logs(namespace, name)}")
            return bool(status.get("failed"))
        cluster.wait_for(failed, timeout=timeout, what=f"job {name} to fail")
    return cluster.job_logs(namespace, name)


MIN_SECRET = 6  # shorter Secret values ("x", "app") would match by chance; so would a value
# that equals a name in the manifests (a key called "old-password"): tests avoid those


def secret_values(cluster: harness.Cluster, namespace: str) -> set[str]:
    """Every value of every Secret in `namespace` (the passwords in use, bootstrap ones too)."""
    values = set()
    for secret in cluster.get("-n", namespace, "secrets")["items"]:
        if secret.get("type") == "kubernetes.io/service-account-token":
            continue
        for encoded in (secret.get("data") or {}).values():
            value = base64.b64decode(encoded).decode(errors="replace")
            if len(value) >= MIN_SECRET:
                values.add(value)
    return values


def job_logs(cluster: harness.Cluster, namespace: str, pods: list[dict[str, Any]]) -> dict[str, str]:
    """The logs of every container (init containers too) of the Jobs' pods still there:
    what a Job printed, its scripts' messages and its clients' errors."""
    logs = {}
    for pod in pods:
        metadata = pod.get("metadata") or {}
        if not any(o.get("kind") == "Job" for o in metadata.get("ownerReferences") or []):
            continue
        spec = pod.get("spec") or {}
        for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            name = f"{metadata.get('name')}/{container['name']}"
            logs[f"log of {name}"] = cluster.kubectl("-n", namespace, "logs", str(metadata.get("name")),
                                                     "-c", container["name"], check=False).stdout
    return logs


def leaks(cluster: harness.Cluster, namespace: str, operator: harness.Operator) -> list[str]:
    """Where a Secret value of `namespace` appears (plain or base64) outside the Secrets: the
    operator's log, its runner artifacts (beside the log), the namespace's Events, the
    MySQL, MySQLBackup and MySQLRestore objects' status, the specs of its pods, Deployments,
    Jobs and CronJobs (with a bucket, their shipping containers) and the logs of its Jobs'
    pods (job_logs). A run's input
    (env/extravars) counts only once the operator has stopped: while it runs, the file of a
    run in progress must merely be private to its owner."""
    places: dict[str, str] = {"operator log": operator.log()}
    runner_dir = operator.log_path.parent / "runner"
    found = []
    for path in sorted(runner_dir.rglob("*")) if runner_dir.exists() else []:
        if not path.is_file():
            continue
        with contextlib.suppress(FileNotFoundError):  # a run ended, or its artifacts rotated away
            if path.name == "extravars" and path.parent.name == "env" and operator.alive():
                # The input of a run in progress (the whole object: runner.py), mode 0600 and
                # removed when the run ends; once the operator has stopped it must be gone.
                if path.stat().st_mode & 0o077:
                    found.append(f"{path.relative_to(runner_dir)} is readable by others than its owner")
                continue
            places[f"artifact {path.relative_to(runner_dir)}"] = path.read_text(errors="replace")
    events = cluster.get("-n", namespace, "events")["items"]
    places["events"] = json.dumps([[e.get("reason"), e.get("message")] for e in events], ensure_ascii=False)
    for kind in ("mysqls", "mysqlbackups", "mysqlrestores"):
        objects = cluster.get("-n", namespace, f"{kind}.otus.homework")["items"]
        places[f"{kind} status"] = json.dumps([o.get("status") for o in objects], ensure_ascii=False)
    for kind in ("pods", "deployments", "jobs", "cronjobs"):
        items = cluster.get("-n", namespace, kind)["items"]
        places[f"{kind} specs"] = json.dumps([i.get("spec") for i in items], ensure_ascii=False)
        if kind == "pods":
            places.update(job_logs(cluster, namespace, items))
    for value in secret_values(cluster, namespace):
        forms = {"plain": value, "base64": base64.b64encode(value.encode()).decode()}
        for where, text in places.items():
            found += [f"{form} Secret value sha256:{hashlib.sha256(value.encode()).hexdigest()[:8]} "
                      f"({len(value)} chars) in {where}"
                      for form, needle in forms.items() if needle in text]
    figures.add("leak scans")
    figures.add("leaks found", len(found))
    return found


def diagnostics(cluster: harness.Cluster, namespace: str, operator: harness.Operator | None) -> str:
    parts = []
    for args in (("get", "mysql,deploy,pods,jobs,pvc,svc,secrets", "-o", "wide"),
                 ("get", "events", "--sort-by=.lastTimestamp")):
        parts.append(cluster.kubectl("-n", namespace, *args, check=False).stdout)
    parts.append(cluster.kubectl("get", "pv", check=False).stdout)
    parts.append(json.dumps(cluster.get("-n", namespace, "mysqls.otus.homework").get("items", []), indent=1)[-4000:])
    if operator is not None:
        parts.append("--- operator log (tail) ---\n" + operator.log()[-8000:])
    return "\n".join(parts)


def ready_condition(cluster: harness.Cluster, namespace: str, name: str) -> dict[str, Any]:
    """The object's Ready condition ({} while it has none)."""
    return condition(cluster.get("-n", namespace, "mysqls.otus.homework", name), "Ready") or {}


def warnings_about(cluster: harness.Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    """The Warning events whose object is `name` in `namespace`."""
    events = cluster.get("-n", namespace, "events", "--field-selector", f"involvedObject.name={name}")["items"]
    return [e for e in events if e["type"] == "Warning"]


def wait_warning(cluster: harness.Cluster, namespace: str, name: str, accept: Callable[[str], bool],
                 timeout: float = 60) -> list[str]:
    """Wait for a Warning event about `name` whose message `accept` takes; return the messages
    of every Warning about it. kopf posts the operator's events from a queue, which may
    follow the status patch of the same run: a test that has seen the Failure condition
    waits here for the event."""
    found: list[str] = []

    def arrived() -> bool:
        found[:] = [e["message"] for e in warnings_about(cluster, namespace, name)]
        return any(accept(m) for m in found)

    with contextlib.suppress(AssertionError):
        cluster.wait_for(arrived, timeout=timeout, what=f"a Warning event about {namespace}/{name}", interval=0.5)
    return found


def backup_record(cluster: harness.Cluster, namespace: str, name: str) -> dict[str, Any]:
    """The MySQLBackup `name`."""
    return dict(cluster.get("-n", namespace, "mysqlbackups.otus.homework", name))


def backup_records(cluster: harness.Cluster, namespace: str, instance: str) -> list[dict[str, Any]]:
    """The MySQLBackup records of `instance`."""
    return [r for r in cluster.get("-n", namespace, "mysqlbackups.otus.homework")["items"]
            if r["spec"]["instance"] == instance]


def backup_verified(obj: dict[str, Any]) -> str:
    """A record's Verified condition status ('' before its verification is decided)."""
    return str((condition(obj, "Verified") or {}).get("status", ""))


def wait_backup_decided(cluster: harness.Cluster, namespace: str, name: str, operator: harness.Operator,
                        timeout: float = 600) -> dict[str, Any]:
    """Wait until the record's dump is Complete or Failed and its verification decided."""
    found: dict[str, Any] = {}

    def decided() -> bool:
        if not operator.alive():
            raise AssertionError(f"the operator exited:\n{operator.log()[-6000:]}")
        obj = backup_record(cluster, namespace, name)
        state = obj.get("status", {}).get("state")
        if state == "Failed" or (state == "Complete" and backup_verified(obj) in ("True", "False")):
            found.update(obj)
            return True
        return False

    cluster.wait_for(decided, timeout=timeout, what=f"MySQLBackup {namespace}/{name} to be decided", interval=1)
    return found


def wait_ready(cluster: harness.Cluster, namespace: str, name: str, timeout: int = 300) -> None:
    """Wait until the MySQL Deployment's pod is Ready (Successful means applied, not serving)."""
    cluster.kubectl("-n", namespace, "rollout", "status", f"deployment/{name}", f"--timeout={timeout}s",
                    timeout=timeout + 20)


def admission_refusals(cluster: harness.Cluster, namespace: str) -> list[str]:
    """What the namespace's events say was refused or warned of by Pod Security admission: a
    controller that could not create a pod (FailedCreate: "... is forbidden: violates
    PodSecurity ..."), or any event that names Pod Security."""
    events = cluster.get("-n", namespace, "events")["items"]
    return [f"{e['involvedObject'].get('kind')}/{e['involvedObject'].get('name')}: {e['reason']}: {e.get('message', '')}"
            for e in events
            if e.get("reason") == "FailedCreate" or "PodSecurity" in e.get("message", "")]


def pod_security_warnings(operator: harness.Operator) -> list[str]:
    """The operator log's lines that carry the API server's Pod Security warnings (a
    namespace labelled pod-security.kubernetes.io/warn answers every create or update of a
    workload whose pod template it would refuse with "would violate PodSecurity")."""
    return [line for line in operator.log().splitlines() if "violate PodSecurity" in line]


# A table whose dump takes a moment (65,536 rows, about 13 MB) and, dumped after it, one that
# a second client rebuilds during the dump (backup_meeting_ddl).
DDL_TABLES = ("CREATE TABLE a_big (id INT AUTO_INCREMENT PRIMARY KEY, pad CHAR(200)); "
              "INSERT INTO a_big (pad) VALUES (REPEAT('x', 200)); "
              + "INSERT INTO a_big (pad) SELECT pad FROM a_big; " * 16
              + "CREATE TABLE z_rebuilt (id INT PRIMARY KEY); INSERT INTO z_rebuilt VALUES (1), (2);")


def backup_meeting_ddl(cluster: harness.Cluster, namespace: str, instance: str, pod: str,
                       operator: harness.Operator, *, password: str, database: str) -> str:
    """On-demand backups of `instance` (which has DDL_TABLES) while a client in its server
    `pod` rebuilds z_rebuilt (ALTER TABLE ... ENGINE=InnoDB) every 0.2 s, until one's dump
    Job says it takes the backup again ("trying again"), three at most: the name of that
    backup. Whether a rebuild lands inside a dump is the two clients' timing; a backup that
    missed every rebuild must be Complete all the same."""
    stop = f"/tmp/stop-ddl-{instance}"
    rebuilder = subprocess.Popen(
        [cluster.kubectl_bin, "--kubeconfig", cluster.kubeconfig, "-n", namespace, "exec", pod, "-c", "mysql",
         "--", "sh", "-c", f"while [ ! -e {stop} ]; do mysql -uroot -p{password} {database} "
         "-e 'ALTER TABLE z_rebuilt ENGINE=InnoDB' 2>/dev/null; sleep 0.2; done"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for attempt in range(1, 4):
            backup = f"{instance}-ddl-{attempt}"
            job = f"{backup}-dump"
            cluster.apply(json.dumps({"apiVersion": "otus.homework/v1", "kind": "MySQLBackup",
                                      "metadata": {"name": backup, "namespace": namespace},
                                      "spec": {"instance": instance}}))

            def retried_or_decided(backup: str = backup, job: str = job) -> bool:
                if "trying again" in cluster.job_logs(namespace, job):
                    return True
                state = backup_record(cluster, namespace, backup).get("status", {}).get("state")
                return state in ("Complete", "Failed")
            cluster.wait_for(retried_or_decided, timeout=300, interval=0.5,
                             what=f"the dump Job {job} to meet the DDL or finish")
            if "trying again" in cluster.job_logs(namespace, job):
                return backup
            missed = wait_backup_decided(cluster, namespace, backup, operator)
            assert missed["status"]["state"] == "Complete", missed["status"]
            print(f"  {backup}: the dump met no rebuild; another backup")
    finally:
        cluster.kubectl("-n", namespace, "exec", pod, "-c", "mysql", "--", "touch", stop, check=False)
        rebuilder.wait(timeout=60)
    raise AssertionError(f"none of three dumps of {instance} met the rebuilds")


def account_token(cluster: harness.Cluster, namespace: str, account: str) -> str:
    """A token of the ServiceAccount `account`: from the TokenRequest API (`kubectl create
    token`, kubectl 1.24+), else from the token Secret that Kubernetes up to 1.23 creates."""
    requested = cluster.kubectl("-n", namespace, "create", "token", account, "--duration=1h", check=False)
    if requested.returncode == 0:
        return requested.stdout.strip()

    def token_secret() -> bool:
        return bool(cluster.get("-n", namespace, "serviceaccount", account).get("secrets"))
    cluster.wait_for(token_secret, timeout=60, what=f"the token Secret of {namespace}/{account}", interval=0.3)
    secret = cluster.get("-n", namespace, "serviceaccount", account)["secrets"][0]["name"]
    return base64.b64decode(cluster.get("-n", namespace, "secret", secret)["data"]["token"]).decode()


def service_account_kubeconfig(cluster: harness.Cluster, namespace: str, account: str,
                               path: Path) -> harness.Cluster:
    """A kubeconfig at `path` that authenticates as the ServiceAccount `account` with a token
    of its own, with the server and CA of the cluster's kubeconfig (its current context)."""
    token = account_token(cluster, namespace, account)
    admin_path = Path(cluster.kubeconfig)
    admin = yaml.safe_load(admin_path.read_text())
    context = next(c["context"] for c in admin["contexts"] if c["name"] == admin["current-context"])
    server = next(c["cluster"] for c in admin["clusters"] if c["name"] == context["cluster"])
    ca = {key: server[key] for key in ("certificate-authority-data", "insecure-skip-tls-verify") if key in server}
    if "certificate-authority" in server:  # a path, relative to the kubeconfig's directory
        ca["certificate-authority"] = str(admin_path.parent / server["certificate-authority"])
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": {"server": server["server"], **ca}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "cluster", "user": account,
                                                   "namespace": namespace}}],
        "current-context": account,
    }
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config))
    return harness.Cluster(kubeconfig=str(path), kubectl_bin=cluster.kubectl_bin, local=cluster.local)
