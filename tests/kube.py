"""What the integration tests run in the cluster: the server images, and the manifests of the
Jobs that reach those servers as clients would. The cluster itself is tests/harness.py's."""

from __future__ import annotations

import json
import os
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
LOCAL_PAUSE_IMAGE = "localhost/pause:local"
# The image of tests that need one server or client image and do not depend on which.
MYSQL_IMAGE = next(iter(SERVER_IMAGES.values()))


# Every pod the tests make runs as Pod Security "restricted" admits it (their namespaces
# enforce it): the server images' mysql user from the start, no privilege escalation, no
# capabilities, the runtime's seccomp profile.
RUN_AS = 999
POD_SECURITY = {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "fsGroup": RUN_AS,
                "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _client_pod(script: str, env: list[dict[str, Any]] | None, image: str) -> dict[str, Any]:
    """The pod spec of one container `client` that runs `script` with sh in `image`, never
    restarted, admitted at Pod Security restricted."""
    return {"restartPolicy": "Never", "enableServiceLinks": False, "securityContext": POD_SECURITY,
            "containers": [{"name": "client", "image": image, "imagePullPolicy": "IfNotPresent",
                            "securityContext": CONTAINER_SECURITY, "command": ["sh", "-c", script],
                            "env": env or []}]}


def shell_job(namespace: str, name: str, script: str, *, env: list[dict[str, Any]] | None = None,
              labels: dict[str, str] | None = None, image: str = MYSQL_IMAGE) -> str:
    """A Job of one pod that runs `script` with sh in `image`, once (no retries)."""
    return json.dumps({"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
                       "spec": {"backoffLimit": 0, "template": {"spec": _client_pod(script, env, image)}}})


def shell_pod(namespace: str, name: str, script: str, *, env: list[dict[str, Any]] | None = None,
              image: str = MYSQL_IMAGE) -> str:
    """A bare Pod that runs `script` with sh in `image`, never restarted: for a long-lived
    client that tests reach with `kubectl exec` (the pod of shell_job, without the Job)."""
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
                       "spec": _client_pod(script, env, image)})


def sql_client_job(namespace: str, name: str, host: str, database: str, sql: str, *, secret: str,
                   key: str = "password", user: str = "root", wait_for_server: bool = False,
                   labels: dict[str, str] | None = None, image: str = MYSQL_IMAGE, port: int = 3306) -> str:
    """
    A Job that runs `sql` with the mysql client against `host` (and `port`), as an application
    would: the password from a Secret (MYSQL_PWD), the SQL in an environment variable, never in
    a command line. `wait_for_server`: ping the server for up to 2 minutes first.
    """
    client = (f"mysql -h {host} -P {int(port)} -u{user} --batch --skip-column-names --connect-timeout=10 "
              f"{database} -e \"$SQL\"")
    if wait_for_server:
        client = (f"for i in $(seq 60); do mysqladmin -h {host} -P {int(port)} -u{user} ping >/dev/null 2>&1 && break; "
                  f"sleep 2; done; exec {client}")
    env: list[dict[str, Any]] = [{"name": "SQL", "value": sql},
           {"name": "MYSQL_PWD", "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}]
    return shell_job(namespace, name, client, env=env, labels=labels, image=image)
