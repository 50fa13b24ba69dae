"""Small helpers over kubectl for the integration tests (a real API server, never mocked)."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The server images the server-facing tests run against, each also the client image of its
# tests' SQL Jobs: on the local cluster both images cluster/images builds (MariaDB from
# Debian bookworm, Oracle MySQL from Debian sid, each with an entrypoint that reproduces the
# official image's behaviours); `$TEST_MYSQL_IMAGE` replaces them with one image the
# cluster's nodes can pull (for example mysql:8.4 on another cluster).
LOCAL_SERVER_IMAGES = {
    "mariadb": "localhost/mariadb:10.11-bookworm",
    "mysql": "localhost/mysql:9.7-debian",
}
SERVER_IMAGES = ({"env": os.environ["TEST_MYSQL_IMAGE"]} if os.environ.get("TEST_MYSQL_IMAGE")
                 else LOCAL_SERVER_IMAGES)
# The local cluster's pause image (cluster/images/build.sh): a container that runs and
# does nothing, for tests that check objects rather than what runs in them.
LOCAL_PAUSE_IMAGE = "localhost/pause:k8s-1.20.2"
# The image of tests that need one server or client image and do not depend on which.
MYSQL_IMAGE = next(iter(SERVER_IMAGES.values()))


def shell_job(namespace: str, name: str, script: str, *, env: list[dict[str, Any]] | None = None,
              labels: dict[str, str] | None = None, image: str = MYSQL_IMAGE) -> str:
    """A Job of one pod that runs `script` with sh in `image`, once (no retries)."""
    return textwrap.dedent(f"""\
        apiVersion: batch/v1
        kind: Job
        metadata: {{name: {name}, namespace: {namespace}, labels: {json.dumps(labels or {})}}}
        spec:
          backoffLimit: 0
          template:
            spec:
              restartPolicy: Never
              containers:
              - name: client
                image: {image}
                imagePullPolicy: IfNotPresent
                command: [sh, -c, {json.dumps(script)}]
                env: {json.dumps(env or [])}
        """)


def sql_client_job(namespace: str, name: str, host: str, database: str, sql: str, *, secret: str,
                   key: str = "password", user: str = "root", wait_for_server: bool = False,
                   labels: dict[str, str] | None = None, image: str = MYSQL_IMAGE) -> str:
    """
    A Job that runs `sql` with the mysql client against `host`, as an application would: the
    password from a Secret (MYSQL_PWD), the SQL in an environment variable, never in a
    command line. `wait_for_server`: ping the server for up to 2 minutes first.
    """
    client = (f"mysql -h {host} -u{user} --batch --skip-column-names --connect-timeout=10 "
              f"{database} -e \"$SQL\"")
    if wait_for_server:
        client = (f"for i in $(seq 60); do mysqladmin -h {host} -u{user} ping >/dev/null 2>&1 && break; "
                  f"sleep 2; done; exec {client}")
    env = [{"name": "SQL", "value": sql},
           {"name": "MYSQL_PWD", "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}]
    return shell_job(namespace, name, client, env=env, labels=labels, image=image)


@dataclass(frozen=True)
class Cluster:
    """A reachable cluster: its kubeconfig, the kubectl to use, and whether it is the local one."""

    kubeconfig: str
    kubectl_bin: str
    local: bool

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.kubectl_bin, "--kubeconfig", self.kubeconfig, *args],
            input=stdin, capture_output=True, text=True, timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done

    def apply(self, manifest: str, namespace: str | None = None) -> None:
        args = ["apply", "-f", "-"] + (["-n", namespace] if namespace else [])
        self.kubectl(*args, stdin=manifest)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def wait_for(self, probe: Callable[[], bool], timeout: float, what: str, interval: float = 1.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if probe():
                return
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")

    def create_namespace(self, name: str) -> str:
        """Create namespace `name` and wait for its default ServiceAccount (pods need it)."""
        self.kubectl("create", "namespace", name)
        self.wait_for(lambda: self.kubectl("-n", name, "get", "serviceaccount", "default", check=False).returncode == 0,
                      timeout=60, what=f"the default ServiceAccount of {name}")
        return name

    def wait_ready(self) -> None:
        def node_ready() -> bool:
            done = self.kubectl("get", "nodes", "-o", "json", check=False)
            if done.returncode != 0:
                return False
            nodes = json.loads(done.stdout)["items"]
            return bool(nodes) and all(
                c["status"] == "True" for n in nodes for c in n["status"]["conditions"] if c["type"] == "Ready"
            )
        self.wait_for(node_ready, timeout=180, what="a Ready node")

    def job_logs(self, namespace: str, job: str) -> str:
        return self.kubectl("-n", namespace, "logs", f"job/{job}", check=False).stdout

    def wait_job(self, namespace: str, job: str, timeout: float = 300) -> None:
        def finished() -> bool:
            status = self.get("-n", namespace, "job", job).get("status", {})
            if status.get("failed", 0) > 0 and not status.get("active"):
                raise AssertionError(f"job {job} failed:\n{self.job_logs(namespace, job)}")
            return bool(status.get("succeeded"))
        self.wait_for(finished, timeout=timeout, what=f"job {namespace}/{job} to complete")
