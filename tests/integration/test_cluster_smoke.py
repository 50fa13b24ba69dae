"""Smoke tests of the cluster itself: storage, Deployments, Services, Jobs, cluster DNS and CRD validation.

These talk to a real API server and a real node (the local cluster, or `$KUBECONFIG`).
"""

from __future__ import annotations

import json
import shutil
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import harness, kube

MYSQL_IMAGE = kube.MYSQL_IMAGE
HOSTPATH_BASE = Path("/var/lib/otus-smoke")


@pytest.fixture
def hostpath_dir(namespace: str) -> Iterator[Path]:
    # made writable for the server's non-root user, as a local-path provisioner makes its
    # directories (a hostPath volume has no fsGroup ownership)
    path = HOSTPATH_BASE / namespace
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _server_manifests(namespace: str, path: Path) -> str:
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: PersistentVolume
        metadata: {{name: smoke-{namespace}}}
        spec:
          capacity: {{storage: 1Gi}}
          accessModes: [ReadWriteOnce]
          persistentVolumeReclaimPolicy: Retain
          storageClassName: ""
          claimRef: {{namespace: {namespace}, name: data}}
          hostPath: {{path: {path}, type: DirectoryOrCreate}}
        ---
        apiVersion: v1
        kind: PersistentVolumeClaim
        metadata: {{name: data, namespace: {namespace}}}
        spec:
          accessModes: [ReadWriteOnce]
          storageClassName: ""
          volumeName: smoke-{namespace}
          resources: {{requests: {{storage: 1Gi}}}}
        ---
        apiVersion: v1
        kind: Secret
        metadata: {{name: db, namespace: {namespace}}}
        stringData: {{password: smoke-pw}}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: db, namespace: {namespace}}}
        spec:
          selector: {{matchLabels: {{app: db}}}}
          strategy: {{type: Recreate}}
          template:
            metadata: {{labels: {{app: db}}}}
            spec:
              securityContext: {json.dumps(kube.POD_SECURITY)}
              containers:
              - name: mysql
                image: {MYSQL_IMAGE}
                imagePullPolicy: IfNotPresent
                securityContext: {json.dumps(kube.CONTAINER_SECURITY)}
                env:
                - name: MYSQL_ROOT_PASSWORD
                  valueFrom: {{secretKeyRef: {{name: db, key: password}}}}
                - {{name: MYSQL_DATABASE, value: smoke}}
                ports: [{{containerPort: 3306}}]
                readinessProbe:
                  exec: {{command: [mysqladmin, ping, -h, 127.0.0.1]}}
                  periodSeconds: 2
                volumeMounts: [{{name: data, mountPath: /var/lib/mysql}}]
              volumes: [{{name: data, persistentVolumeClaim: {{claimName: data}}}}]
        ---
        apiVersion: v1
        kind: Service
        metadata: {{name: db, namespace: {namespace}}}
        spec:
          selector: {{app: db}}
          ports: [{{port: 3306}}]
        """)


def _client_job(namespace: str, name: str, host: str, sql: str) -> str:
    # A ready pod is not yet a reachable Service: kube-proxy programs the new endpoint a
    # moment later (a connect timed out there once, on a loaded node). The client waits
    # for the server, as an application's retry would.
    return kube.sql_client_job(namespace, name, host, "smoke", sql, secret="db", wait_for_server=True)


def test_mysql_deployment_reached_by_service_dns_name(cluster: harness.Cluster, namespace: str, hostpath_dir: Path) -> None:
    try:
        cluster.apply(_server_manifests(namespace, hostpath_dir))
        cluster.kubectl("-n", namespace, "rollout", "status", "deployment/db", "--timeout=240s", timeout=260)
        marker = uuid.uuid4().hex
        fqdn = f"db.{namespace}.svc.cluster.local"
        cluster.apply(_client_job(namespace, "write", fqdn,
                                  f"CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(64)); "
                                  f"INSERT INTO t VALUES (1, '{marker}'); SELECT v FROM t WHERE id = 1;"))
        cluster.wait_job(namespace, "write", timeout=180)
        assert cluster.job_logs(namespace, "write").split() == [marker]
        # The short service name resolves too, through the pod's DNS search path.
        cluster.apply(_client_job(namespace, "read-short", "db", "SELECT v FROM t WHERE id = 1;"))
        cluster.wait_job(namespace, "read-short", timeout=180)
        assert cluster.job_logs(namespace, "read-short").split() == [marker]
    finally:
        cluster.kubectl("delete", "namespace", namespace, "--wait=true", "--timeout=120s", check=False, timeout=150)
        cluster.kubectl("delete", "pv", f"smoke-{namespace}", "--wait=false", check=False)


def test_unknown_service_name_does_not_resolve(cluster: harness.Cluster, namespace: str) -> None:
    job = kube.shell_job(namespace, "lookup", "getent hosts kubernetes.default.svc.cluster.local; echo rc=$?; "
                                              "getent hosts no-such-service; echo rc=$?")
    cluster.apply(job)
    cluster.wait_job(namespace, "lookup", timeout=180)
    out = cluster.job_logs(namespace, "lookup")
    lines = out.splitlines()
    address, name = lines[0].split()[:2]
    assert name == "kubernetes.default.svc.cluster.local", out
    assert address == cluster.get("-n", "default", "service", "kubernetes")["spec"]["clusterIP"], out
    assert lines[1:] == ["rc=0", "rc=2"], out


CRD = textwrap.dedent("""\
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata: {name: widgets.smoke.otus.test}
    spec:
      group: smoke.otus.test
      scope: Namespaced
      names: {plural: widgets, singular: widget, kind: Widget}
      versions:
      - name: v1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                required: [size]
                properties:
                  size: {type: integer, minimum: 1}
                  note: {type: string}
    """)


def test_structural_schema_rejects_missing_required_field(cluster: harness.Cluster, namespace: str) -> None:
    cluster.apply(CRD)
    cluster.kubectl("wait", "--for=condition=Established", "crd/widgets.smoke.otus.test", "--timeout=60s")
    bad = f"apiVersion: smoke.otus.test/v1\nkind: Widget\nmetadata: {{name: bad, namespace: {namespace}}}\nspec: {{}}\n"
    # --validate=false: the API server itself must refuse it, not kubectl's client-side check.
    done = cluster.kubectl("create", "--validate=false", "-f", "-", stdin=bad, check=False)
    assert done.returncode != 0
    assert "spec.size: Required value" in done.stderr
    # An empty string is a string (the validator built with Go >= 1.18 once called it null).
    good = bad.replace("name: bad", "name: good").replace("spec: {}", "spec: {size: 3, note: ''}")
    cluster.kubectl("create", "--validate=false", "-f", "-", stdin=good)
    assert cluster.get("-n", namespace, "widgets.smoke.otus.test", "good")["spec"] == {"size": 3, "note": ""}
