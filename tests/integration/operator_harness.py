"""The operator under test, run as a real process (`python -m ansible_kopf`) against a real cluster,
and the MySQL-side helpers the operator tests share: objects, conditions, SQL through Jobs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests import kube

REPO = Path(__file__).resolve().parents[2]
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


@dataclass
class Operator:
    """A running operator process and its log."""

    log_path: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    log_offset: int = field(default=0)

    def start(self) -> None:
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ansible_kopf"], cwd=REPO, env=self.env,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def log(self, since_start: bool = False) -> str:
        text = self.log_path.read_bytes()
        return text[self.log_offset:].decode(errors="replace") if since_start else text.decode(errors="replace")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def start_operator(cluster: kube.Cluster, namespace: str, workdir: Path,
                   watches: Path | None = None) -> Operator:
    env = dict(os.environ)
    env.update({
        "KUBECONFIG": cluster.kubeconfig,
        "WATCH_NAMESPACE": namespace,
        "WATCHES_FILE": str(watches or REPO / "watches.yaml"),
        "ANSIBLE_KOPF_WORKDIR": str(workdir / "runner"),
        "PYTHONPATH": str(REPO / "operator"),
    })
    operator = Operator(log_path=workdir / "operator.log", env=env)
    operator.start()
    return operator


def remove_namespace(cluster: kube.Cluster, namespace: str) -> None:
    """Delete `namespace` and what the mysql role keeps outside it: the PersistentVolumes
    labelled with it (the backup volume outlives its object by design) and, when the local
    cluster runs (its node is this host), their directories. Drop finalizers before."""
    cluster.kubectl("delete", "namespace", namespace, "--wait=true", "--timeout=180s", check=False, timeout=200)
    cluster.kubectl("delete", "pv", "-l", f"otus.homework/mysql-namespace={namespace}", "--wait=false",
                    check=False)
    if LOCAL_NODE_SOCKET.exists():  # the local cluster runs: its node is this host
        for kind in ("data", "backups"):
            shutil.rmtree(HOSTPATH_BASE / kind / namespace, ignore_errors=True)


def install_crd(cluster: kube.Cluster) -> None:
    cluster.kubectl("apply", "-f", str(REPO / "deploy" / "crd.yml"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/mysqls.otus.homework", "--timeout=60s")


def mysql_object(name: str, namespace: str, **spec: Any) -> str:
    body = {
        "apiVersion": "otus.homework/v1",
        "kind": "MySQL",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"image": MYSQL_IMAGE, "database": "otus-database", "password": "otuspassword",
                 "storage_size": "1Gi", **spec},
    }
    return json.dumps(body)


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in obj.get("status", {}).get("conditions", []):
        if cond.get("type") == kind:
            return dict(cond)
    return None


def wait_successful(cluster: kube.Cluster, namespace: str, name: str, operator: Operator,
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


def sql_job(cluster: kube.Cluster, namespace: str, host: str, database: str, sql: str,
            secret: str, key: str = "password", user: str = "root", expect_success: bool = True,
            timeout: float = 240, image: str = MYSQL_IMAGE) -> str:
    """Run `sql` in a Job pod (client of `image`) that connects to `host` by DNS name; return its output."""
    name = f"sql-{uuid.uuid4().hex[:8]}"
    manifest = kube.sql_client_job(namespace, name, host, database, sql, secret=secret, key=key,
                                   user=user, labels={"test-client": "true"}, image=image)
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


def diagnostics(cluster: kube.Cluster, namespace: str, operator: Operator | None) -> str:
    parts = []
    for args in (("get", "mysql,deploy,pods,jobs,pvc,svc,secrets", "-o", "wide"),
                 ("get", "events", "--sort-by=.lastTimestamp")):
        parts.append(cluster.kubectl("-n", namespace, *args, check=False).stdout)
    parts.append(cluster.kubectl("get", "pv", check=False).stdout)
    parts.append(json.dumps(cluster.get("-n", namespace, "mysqls.otus.homework").get("items", []), indent=1)[-4000:])
    if operator is not None:
        parts.append("--- operator log (tail) ---\n" + operator.log()[-8000:])
    return "\n".join(parts)


def audit_writes(namespace: str, since: float) -> list[dict[str, Any]]:
    """Write requests the local API server logged for `namespace` since `since` (epoch seconds)."""
    path = Path("/var/lib/otus-cluster/logs/audit.log")
    writes = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        ref = entry.get("objectRef", {})
        if ref.get("namespace") != namespace or ref.get("resource") == "events":
            continue
        stamp = entry.get("stageTimestamp") or entry.get("requestReceivedTimestamp")
        if stamp and _epoch(stamp) >= since:
            writes.append(entry)
    return writes


def _epoch(stamp: str) -> float:
    from datetime import datetime
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def now() -> float:
    return time.time()


def ready_condition(cluster: kube.Cluster, namespace: str, name: str) -> dict[str, Any]:
    """The object's Ready condition ({} while it has none)."""
    return condition(cluster.get("-n", namespace, "mysqls.otus.homework", name), "Ready") or {}


def warnings_about(cluster: kube.Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    """The Warning events whose object is `name` in `namespace`."""
    events = cluster.get("-n", namespace, "events", "--field-selector", f"involvedObject.name={name}")["items"]
    return [e for e in events if e["type"] == "Warning"]


def wait_ready(cluster: kube.Cluster, namespace: str, name: str, timeout: int = 300) -> None:
    """Wait until the MySQL Deployment's pod is Ready (Successful means applied, not serving)."""
    cluster.kubectl("-n", namespace, "rollout", "status", f"deployment/{name}", f"--timeout={timeout}s",
                    timeout=timeout + 20)
