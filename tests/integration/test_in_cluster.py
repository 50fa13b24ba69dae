"""The operator as users install it: in the cluster, from its image and deploy/.

The image is built without Docker (images/operator/build.sh executes the Dockerfile) and
imported into the local cluster's containerd; `kubectl apply -k deploy/` installs the
operator, watching every namespace. Then a MySQL object lives its whole life through it:
Successful, rows written through its Service, deleted (the backup Job), applied again (the
restore Job), and the rows are back. A second replica must wait for the leader.

Only on the local cluster: nothing else can receive the image. This module removes the
operator at its end (`kubectl delete` of everything deploy/ installs but the CRD, which other
tests use). Its scope (TEST_OPERATOR_SCOPE):
- `auto` (the default): watching every namespace, as `kubectl apply -k deploy/` installs it,
  when nothing else is around: no other operator or role run on this host, no MySQL object
  outside this module's namespace. On a used cluster (`make run` stopped with Ctrl-C leaves
  its object and finalizer; another session's objects) the same manifests are deployed with
  WATCH_NAMESPACE set to this module's own namespace, which cannot touch anyone else's
  objects: the module neither waits for others' objects nor reconciles them.
- `cluster`: always every namespace, after waiting (up to 300 s) until it is alone.
- `namespace`: always only this module's namespace.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests import harness, kube
from tests.integration import operator_harness as oh

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "images" / "operator" / "build.sh"
MYSQL_IMAGE = kube.MYSQL_IMAGE
OPERATOR_NAMESPACE = "mysql-operator"
DEPLOYMENT = "mysql-operator"
LOCK = "mysql-operator-lock"
CRD_NAME = "mysqls.otus.homework"
MYSQLS = CRD_NAME  # never the short name: another CRD may also call its kind MySQL
LOCAL_STATE = Path("/var/lib/otus-cluster")  # the local cluster's (cluster/cluster.sh)
BUILD_TIMEOUT = 1800  # a cold build (debootstrap + PyPI) takes minutes; a warm one seconds
QUIET_WAIT = 300  # seconds to wait for other operators and their objects to go
SCOPE = os.environ.get("TEST_OPERATOR_SCOPE", "auto")  # or "cluster" or "namespace" (see above)
TEST_NAMESPACE = f"incluster-{uuid.uuid4().hex[:8]}"  # the MySQL objects' namespace


@dataclass(frozen=True)
class InstalledOperator:
    ref: str  # localhost/mysql-operator:dev-<key>
    tarball: Path
    image_id: str  # sha256:<config digest>, what a pod's status reports as its imageID


# --- helpers --------------------------------------------------------------------------------


def rendered(cluster: harness.Cluster, path: str) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize <path>` renders (the cluster's own kubectl)."""
    out = cluster.kubectl("kustomize", str(REPO / path)).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def as_yaml(objects: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objects, sort_keys=False)


def diagnose(cluster: harness.Cluster, namespace: str | None = None) -> str:
    """Operator logs, pods and events, to append to an assertion message."""
    parts = []

    def run(title: str, *args: str) -> None:
        done = cluster.kubectl(*args, check=False, timeout=60)
        parts.append(f"--- {title}\n{done.stdout}{done.stderr}")

    run("operator pods", "-n", OPERATOR_NAMESPACE, "get", "pods", "-o", "wide")
    run("operator log (last 150 lines)", "-n", OPERATOR_NAMESPACE, "logs",
        f"deployment/{DEPLOYMENT}", "-c", "operator", "--tail=150")
    run("operator namespace events", "-n", OPERATOR_NAMESPACE, "get", "events",
        "--sort-by=.lastTimestamp")
    if namespace:
        run(f"objects in {namespace}", "-n", namespace, "get",
            f"{MYSQLS},deployments,pods,jobs,pvc,secrets", "-o", "wide")
        run(f"MySQL objects in {namespace}", "-n", namespace, "get", MYSQLS, "-o", "yaml")
        run(f"events in {namespace}", "-n", namespace, "get", "events", "--sort-by=.lastTimestamp")
    return "\n".join(parts)


def explained(cluster: harness.Cluster, namespace: str | None, step: Callable[[], object]) -> None:
    """Run a step; if it fails, fail with the operator's logs and the events attached."""
    try:
        step()
    except AssertionError as e:
        raise AssertionError(f"{e}\n\n{diagnose(cluster, namespace)}") from None


def foreign_processes() -> list[str]:
    """Operators and role runs on this host outside any pod (`make run`, other tests)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == str(os.getpid()):
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cgroup = (proc / "cgroup").read_text()
        except OSError:
            continue
        if ("ansible_kopf" in cmdline or "ansible-playbook" in cmdline) and "kubepods" not in cgroup:
            found.append(f"process {proc.name}: {cmdline.strip()[:200]}")
    return found


def foreign_mysqls(cluster: harness.Cluster) -> list[str]:
    """MySQL objects outside this module's namespaces: another test's, for another operator."""
    done = cluster.kubectl("get", MYSQLS, "--all-namespaces", "-o", "json", check=False)
    if done.returncode != 0:  # no CRD yet: no objects
        return []
    return [f"MySQL {o['metadata']['namespace']}/{o['metadata']['name']}"
            for o in json.loads(done.stdout)["items"]
            if not o["metadata"]["namespace"].startswith("incluster-")]


def wait_until_alone(cluster: harness.Cluster) -> None:
    """The in-cluster operator watches every namespace: it must not start while another
    operator, a role test or another test's MySQL objects are around (a shared cluster)."""
    deadline = time.monotonic() + QUIET_WAIT
    while True:
        found = foreign_processes() + foreign_mysqls(cluster)
        if not found:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"not alone on the cluster after {QUIET_WAIT}s: a cluster-wide operator "
                        "would reconcile objects that others reconcile:\n" + "\n".join(found))
        time.sleep(5)


def chosen_scope(cluster: harness.Cluster) -> str:
    """`cluster` or `namespace`: TEST_OPERATOR_SCOPE, or for `auto` what the cluster allows now."""
    if SCOPE in ("cluster", "namespace"):
        return SCOPE
    assert SCOPE == "auto", f"TEST_OPERATOR_SCOPE={SCOPE!r}: expected auto, cluster or namespace"
    found = foreign_processes() + foreign_mysqls(cluster)
    if found:
        print(f"\n>> the in-cluster operator watches only {TEST_NAMESPACE}: others use this cluster\n"
              + "\n".join(found[:10]))
        return "namespace"
    return "cluster"


def load_dockerfile_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "operator_dockerfile", REPO / "images" / "operator" / "dockerfile.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return {}


def watching_only(objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """The objects with the operator's WATCH_NAMESPACE set to one namespace."""
    for obj in objects:
        if obj["kind"] == "Deployment":
            for container in obj["spec"]["template"]["spec"]["containers"]:
                for env in container.get("env", []):
                    if env["name"] == "WATCH_NAMESPACE":
                        env["value"] = namespace
    return objects


def remove_operator(cluster: harness.Cluster) -> None:
    """Delete what `kubectl apply -k deploy/` created, except the CRD, and wait for it."""
    objects = [o for o in rendered(cluster, "deploy")
               if o["kind"] != "CustomResourceDefinition"]
    cluster.kubectl("delete", "--ignore-not-found", "--wait=true", "--timeout=180s", "-f", "-",
                    stdin=as_yaml(objects), check=False, timeout=240)


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def operator(cluster: harness.Cluster) -> Iterator[InstalledOperator]:
    """Build and import the image, `kubectl apply -k deploy/`, wait until the pod is Ready."""
    if not (cluster.local or Path(cluster.kubeconfig).resolve() == LOCAL_STATE / "kubeconfig"):
        pytest.skip("needs the local cluster: the image is imported into its containerd")
    started = time.monotonic()
    build = subprocess.run([str(BUILD_SCRIPT), "import"], capture_output=True, text=True,
                           timeout=BUILD_TIMEOUT, check=False)
    assert build.returncode == 0, f"build.sh import failed:\n{build.stderr[-6000:]}"
    ref = build.stdout.strip().splitlines()[-1]  # localhost/mysql-operator:dev-<key>
    # the tarball of that key (`build.sh path` would hash the sources again, which other
    # work in the tree may have changed since)
    cache = os.environ.get("CLUSTER_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mysql-operator-cluster")
    tarball = Path(cache) / "images" / f"operator-{ref.rsplit(':dev-', 1)[1]}.tar"
    print(f"\n>> {ref} built and imported in {time.monotonic() - started:.0f}s")
    with tarfile.open(tarball) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
    image_id = "sha256:" + manifest[0]["Config"].removesuffix(".json")

    remove_operator(cluster)  # a previous run that was killed may have left it
    # kubectl checks the manifests against the API server's schemas first; before 1.23 the
    # CRD's x-kubernetes-validations (which such a server drops) are not in them (docs/install.md)
    validate = ["--validate=false"] if cluster.server_version < (1, 23) else []
    try:
        if chosen_scope(cluster) == "cluster":
            wait_until_alone(cluster)  # at once when `auto` chose it
            cluster.kubectl("apply", *validate, "-k", str(REPO / "deploy"))
        else:
            cluster.kubectl("apply", *validate, "-f", "-", stdin=as_yaml(watching_only(
                rendered(cluster, "deploy"), TEST_NAMESPACE)))
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
        explained(cluster, None, lambda: cluster.kubectl(
            "-n", OPERATOR_NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}",
            "--timeout=300s", timeout=320))
        yield InstalledOperator(ref=ref, tarball=tarball, image_id=image_id)
    finally:
        remove_operator(cluster)


@pytest.fixture
def incluster_namespace(cluster: harness.Cluster) -> Iterator[str]:
    """The module's own namespace (incluster-*), and what its MySQL objects leave.

    MySQL objects are deleted first, while the operator still runs their finalizer; the
    backup volume outlives them (a PV and files on the node), so those go last.
    """
    name = cluster.create_namespace(TEST_NAMESPACE)
    try:
        yield name
    finally:
        # no backup needed now: allow deleting without one if the server is already down
        cluster.kubectl("-n", name, "annotate", MYSQLS, "--all", "--overwrite",
                        "otus.homework/skip-backup-if-unavailable=true", check=False)
        done = cluster.kubectl("-n", name, "delete", MYSQLS, "--all", "--wait=true",
                               "--timeout=300s", check=False, timeout=330)
        if done.returncode != 0:  # the operator is stuck or gone: drop the finalizers
            for item in cluster.get("-n", name, MYSQLS).get("items", []):
                cluster.kubectl("-n", name, "patch", MYSQLS, item["metadata"]["name"],
                                "--type=merge", "-p", '{"metadata":{"finalizers":[]}}',
                                check=False)
        oh.remove_namespace(cluster, name)


# --- the image ------------------------------------------------------------------------------


def test_image_is_what_the_dockerfile_says(operator: InstalledOperator) -> None:
    """The Docker-less build's config comes from the Dockerfile, and only the listed files."""
    dockerfile = load_dockerfile_module()
    expected = dockerfile.config(dockerfile.instructions(REPO / "Dockerfile"))
    with tarfile.open(operator.tarball) as archive:
        manifest = json.load(archive.extractfile("manifest.json"))  # type: ignore[arg-type]
        config = json.load(archive.extractfile(manifest[0]["Config"]))["config"]  # type: ignore[arg-type]
        layer = archive.extractfile(manifest[0]["Layers"][0])
        assert layer is not None
        with tarfile.open(fileobj=layer, mode="r|") as rootfs:
            names = {m.name for m in rootfs}
    assert sorted(manifest[0]["RepoTags"]) == sorted([operator.ref, "localhost/mysql-operator:dev"])
    assert config["Env"] == [f"{k}={v}" for k, v in expected.env.items()]
    assert config["User"] == expected.user == "1001:1001"
    assert config["WorkingDir"] == expected.workdir
    assert config["Entrypoint"] == expected.entrypoint == ["python", "-m", "ansible_kopf"]
    assert sorted(config["ExposedPorts"]) == expected.expose == ["8080/tcp"]

    app = {n.split("/")[2] for n in names if n.startswith("opt/mysql-operator/")}
    assert app == {"watches.yaml", "roles", "playbooks", "operator"}
    assert {n.split("/")[3] for n in names if n.startswith("opt/mysql-operator/operator/")} \
        == {"ansible_kopf", "collections"}
    # operator_sdk.util as the operator provides it, for roles written for the SDK
    util = "opt/mysql-operator/operator/collections/ansible_collections/operator_sdk/util/plugins/modules/"
    assert {f"{util}{m}.py" for m in ("k8s_status", "requeue_after", "osdk_metric")} <= set(names)
    collections = {"/".join(n.split("/")[4:6]) for n in names
                   if n.startswith("opt/ansible/collections/ansible_collections/")
                   and n.count("/") >= 5}
    assert collections == {"kubernetes/core"}
    site = "opt/venv/lib/python3.11/site-packages/"
    assert not any(n.startswith((f"{site}ansible_collections", f"{site}pip/")) for n in names)
    assert f"{site}kopf/__init__.py" in names
    assert "etc/passwd" in names


# --- the operator in the cluster ------------------------------------------------------------


def mysql_object(namespace: str, name: str, password: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: otus.homework/v1
        kind: MySQL
        metadata: {{name: {name}, namespace: {namespace}}}
        spec:
          image: {MYSQL_IMAGE}
          database: shop
          password: {password}
          storage_size: 1Gi
        """)


def client_job(namespace: str, job: str, instance: str, sql: str) -> str:
    """A Job that runs SQL through the instance's Service, as an application would."""
    return kube.sql_client_job(namespace, job, f"{instance}.{namespace}.svc.cluster.local", "shop", sql,
                               secret=f"{instance}-credentials", wait_for_server=True)


def run_sql(cluster: harness.Cluster, namespace: str, instance: str, job: str, sql: str) -> list[str]:
    cluster.apply(client_job(namespace, job, instance, sql))
    cluster.wait_job(namespace, job, timeout=240)
    return cluster.job_logs(namespace, job).split()


def wait_successful(cluster: harness.Cluster, namespace: str, name: str,
                    timeout: float) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def successful() -> bool:
        done = cluster.kubectl("-n", namespace, "get", MYSQLS, name, "-o", "json", check=False)
        if done.returncode != 0:
            return False
        found.update(json.loads(done.stdout))
        return condition(found, "Successful").get("status") == "True"

    cluster.wait_for(successful, timeout=timeout, what=f"MySQL {namespace}/{name} Successful=True",
                     interval=3)
    return found


def job_succeeded(cluster: harness.Cluster, namespace: str, job: str) -> dict[str, Any]:
    found: dict[str, Any] = cluster.get("-n", namespace, "job", job)
    assert found.get("status", {}).get("succeeded", 0) >= 1, f"Job {job}: {found.get('status')}"
    return found


def gone(cluster: harness.Cluster, namespace: str, *objects: str) -> Callable[[], bool]:
    def probe() -> bool:
        done = cluster.kubectl("-n", namespace, "get", *objects, "--ignore-not-found", "-o", "name",
                               check=False)
        return done.returncode == 0 and not done.stdout.strip()
    return probe


def test_operator_pod_runs_the_built_image_restricted(cluster: harness.Cluster,
                                                      operator: InstalledOperator) -> None:
    pods = cluster.get("-n", OPERATOR_NAMESPACE, "pods", "-l",
                       "app.kubernetes.io/name=mysql-operator")["items"]
    running = [p for p in pods if p["status"].get("phase") == "Running"]
    assert len(running) == 1, [p["metadata"]["name"] for p in pods]
    pod = running[0]
    status = pod["status"]["containerStatuses"][0]
    assert status["ready"], status
    assert status["imageID"] == operator.image_id, (status["imageID"], operator.image_id)
    # the restricted security context is in force: uid 1001, read-only root, /tmp writable
    probe = cluster.kubectl("-n", OPERATOR_NAMESPACE, "exec", pod["metadata"]["name"], "-c",
                            "operator", "--", "sh", "-c",
                            "id -u; touch /opt/x 2>/dev/null && echo rw || echo ro; "
                            "touch /tmp/x && rm /tmp/x && echo tmp-rw; "
                            "grep NoNewPrivs /proc/self/status")
    lines = probe.stdout.split("\n")
    assert lines[:3] == ["1001", "ro", "tmp-rw"], probe.stdout
    assert lines[3].split() == ["NoNewPrivs:", "1"], probe.stdout
    lock = cluster.get("-n", OPERATOR_NAMESPACE, "configmap", LOCK)
    assert lock["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]


def test_mysql_lifecycle_through_the_in_cluster_operator(
        cluster: harness.Cluster, operator: InstalledOperator, incluster_namespace: str) -> None:
    ns, name = incluster_namespace, "shop"
    password = f"pw-{uuid.uuid4().hex[:12]}"
    marker = uuid.uuid4().hex

    def create_and_wait() -> dict[str, Any]:
        cluster.apply(mysql_object(ns, name, password))
        obj = wait_successful(cluster, ns, name, timeout=480)
        cluster.kubectl("-n", ns, "rollout", "status", f"deployment/{name}", "--timeout=300s",
                        timeout=320)
        return obj

    # 1. created: Successful, a server behind the Service, rows written through it
    first: dict[str, Any] = {}
    explained(cluster, ns, lambda: first.update(create_and_wait()))
    assert "restore" not in first["status"], first["status"]
    write = ("CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(64)); "
             f"INSERT INTO items VALUES (1, '{marker}'), (2, 'second'); "
             "SELECT v FROM items ORDER BY id;")
    rows: list[str] = []
    explained(cluster, ns, lambda: rows.extend(run_sql(cluster, ns, name, "write", write)))
    assert rows == [marker, "second"]

    # 2. deleted: the finalizer backs the database up with the Job <name>-backup
    explained(cluster, ns, lambda: cluster.kubectl(
        "-n", ns, "delete", MYSQLS, name, "--wait=true", "--timeout=600s", timeout=620))
    backup: dict[str, Any] = {}
    explained(cluster, ns, lambda: backup.update(job_succeeded(cluster, ns, f"{name}-backup")))
    backup_file = backup["metadata"]["annotations"]["otus.homework/backup-file"]
    claim = cluster.get("-n", ns, "pvc", f"{name}-backup")
    assert claim["metadata"]["annotations"]["otus.homework/latest-backup"] == backup_file
    # the owned children go by garbage collection; the next object starts from a clean slate
    explained(cluster, ns, lambda: cluster.wait_for(
        gone(cluster, ns, f"deployment/{name}", f"pvc/{name}-data", f"secret/{name}-credentials"),
        timeout=180, what="the deleted object's children to be garbage-collected"))

    # 3. applied again: the restore Job loads the backup, and the rows are back
    second: dict[str, Any] = {}
    explained(cluster, ns, lambda: second.update(create_and_wait()))
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["status"]["restore"]["source"] == backup_file, second["status"]
    explained(cluster, ns, lambda: job_succeeded(cluster, ns, f"{name}-restore"))
    rows.clear()
    explained(cluster, ns, lambda: rows.extend(run_sql(
        cluster, ns, name, "read", "SELECT v FROM items ORDER BY id;")))
    assert rows == [marker, "second"]

    # the operator did it all without a restart (e.g. no OOM kill at its memory limit)
    pod = cluster.get("-n", OPERATOR_NAMESPACE, "pods", "-l",
                      "app.kubernetes.io/name=mysql-operator")["items"][0]
    status = pod["status"]["containerStatuses"][0]
    assert status["restartCount"] == 0, (status, diagnose(cluster, ns))
    # /metrics is served with no setting, at the SDK's default address (:8443, plain HTTP),
    # and has counted the runs above (read through the API server's pod proxy)
    scrape = cluster.kubectl("get", "--raw", f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/pods/"
                             f"{pod['metadata']['name']}:8443/proxy/metrics").stdout
    counted = [line for line in scrape.splitlines() if line.startswith(
        'ansible_operator_reconcile_total{GVK="otus.homework/v1/MySQL",result="succeeded"} ')]
    assert counted and float(counted[0].split()[-1]) >= 2, scrape[:3000]
    secret = cluster.get("-n", ns, "secret", f"{name}-credentials")
    assert base64.b64decode(secret["data"]["password"]).decode() == password


def test_a_second_replica_waits_for_the_leader(cluster: harness.Cluster,
                                               operator: InstalledOperator) -> None:
    """Leader for life: an extra replica stays in Init until the leader pod is gone."""
    selector = "app.kubernetes.io/name=mysql-operator"

    def pods() -> list[dict[str, Any]]:
        items = cluster.get("-n", OPERATOR_NAMESPACE, "pods", "-l", selector)["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def ready(pod: dict[str, Any]) -> bool:
        return any(c["type"] == "Ready" and c["status"] == "True"
                   for c in pod["status"].get("conditions", []))

    def lock_owner() -> str:
        return str(cluster.get("-n", OPERATOR_NAMESPACE, "configmap", LOCK)
                   ["metadata"]["ownerReferences"][0]["uid"])

    def check() -> None:
        leader = next(p for p in pods() if ready(p))
        cluster.kubectl("-n", OPERATOR_NAMESPACE, "scale", f"deployment/{DEPLOYMENT}",
                        "--replicas=2")
        cluster.wait_for(lambda: len(pods()) == 2, timeout=60, what="a second operator pod")
        time.sleep(15)  # long enough for a second pod to start if nothing held it
        standby = next(p for p in pods() if p["metadata"]["uid"] != leader["metadata"]["uid"])
        init = standby["status"]["initContainerStatuses"][0]
        assert "running" in init["state"], init
        assert not ready(standby)
        assert lock_owner() == leader["metadata"]["uid"]
        waiting = cluster.kubectl("-n", OPERATOR_NAMESPACE, "logs", standby["metadata"]["name"],
                                  "-c", "leader-election").stdout
        assert f"waiting: the leader is {leader['metadata']['name']}" in waiting, waiting

        # once the leader pod is gone, one waiting pod (the standby, or the leader's
        # replacement: whichever asks first) takes over, and only one
        cluster.kubectl("-n", OPERATOR_NAMESPACE, "delete", "pod", leader["metadata"]["name"],
                        "--wait=true", timeout=120)
        cluster.wait_for(lambda: any(ready(p) for p in pods()), timeout=180,
                         what="a waiting pod to take over")
        new_leader = next(p for p in pods() if ready(p))
        assert new_leader["metadata"]["uid"] != leader["metadata"]["uid"]
        assert lock_owner() == new_leader["metadata"]["uid"]
        time.sleep(10)
        assert [p["metadata"]["name"] for p in pods() if ready(p)] \
            == [new_leader["metadata"]["name"]]

    try:
        explained(cluster, None, check)
    finally:
        cluster.kubectl("-n", OPERATOR_NAMESPACE, "scale", f"deployment/{DEPLOYMENT}",
                        "--replicas=1", check=False)
        cluster.wait_for(lambda: len(pods()) == 1, timeout=120, what="one operator pod again")
