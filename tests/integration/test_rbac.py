"""What the operator's ServiceAccount may do, as the API server's authorizer answers.

For both installs, deploy/ (cluster-wide) and deploy/namespaced/ (one namespace), only the
RBAC objects of the rendered kustomization are applied (no Deployment: no operator runs),
then `kubectl auth can-i --as=system:serviceaccount:mysql-operator:mysql-operator` must say
yes to everything the roles, the shim, kopf and the leader election use, and no to the rest.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from tests import harness

REPO = Path(__file__).resolve().parents[2]
OPERATOR_NAMESPACE = "mysql-operator"
SUBJECT = f"system:serviceaccount:{OPERATOR_NAMESPACE}:mysql-operator"
RBAC_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
              "RoleBinding"}
MYSQLS = "mysqls.otus.homework"
BACKUPS = "mysqlbackups.otus.homework"
RESTORES = "mysqlrestores.otus.homework"


@dataclass(frozen=True)
class Ask:
    """One `kubectl auth can-i` question and the answer the install must give."""

    verb: str
    resource: str
    namespace: str | None  # None: cluster-scoped, or with all_namespaces
    allowed: bool
    subresource: str = ""
    name: str = ""
    all_namespaces: bool = False

    def __str__(self) -> str:
        what = self.resource + (f"/{self.subresource}" if self.subresource else "")
        what += f" {self.name}" if self.name else ""
        where = "all namespaces" if self.all_namespaces else (self.namespace or "cluster")
        return f"{self.verb} {what} in {where}: expected {'yes' if self.allowed else 'no'}"


def can_i(cluster: harness.Cluster, ask: Ask) -> bool:
    args = ["auth", "can-i", ask.verb, f"{ask.resource}/{ask.name}" if ask.name else ask.resource,
            f"--as={SUBJECT}"]
    if ask.subresource:
        args.append(f"--subresource={ask.subresource}")
    if ask.all_namespaces:
        args.append("--all-namespaces")
    elif ask.namespace:
        args += ["-n", ask.namespace]
    done = cluster.kubectl(*args, check=False)
    answer = done.stdout.strip()
    assert answer in ("yes", "no"), f"kubectl {' '.join(args)}: {done.stdout}{done.stderr}"
    return answer == "yes"


def wrong_answers(cluster: harness.Cluster, asks: list[Ask]) -> list[str]:
    return [str(ask) for ask in asks if can_i(cluster, ask) != ask.allowed]


def rbac_objects(cluster: harness.Cluster, path: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("kustomize", str(REPO / path)).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc and doc["kind"] in RBAC_KINDS]


def install(cluster: harness.Cluster, objects: list[dict[str, Any]]) -> Iterator[None]:
    if cluster.kubectl("get", "deployment", "-n", OPERATOR_NAMESPACE, "mysql-operator",
                       "--ignore-not-found", "-o", "name").stdout.strip():
        pytest.fail("an operator is installed in mysql-operator; this test would change its RBAC")
    manifest = yaml.safe_dump_all(objects)
    cluster.kubectl("apply", "-f", "-", stdin=manifest)
    try:
        yield
    finally:
        cluster.kubectl("delete", "--ignore-not-found", "--wait=true", "--timeout=120s", "-f", "-",
                        stdin=manifest, check=False, timeout=150)


@pytest.fixture
def other_namespace(cluster: harness.Cluster) -> Iterator[str]:
    """A namespace the namespaced operator does not own (incluster-*: this module's)."""
    name = cluster.create_namespace(f"incluster-rbac-{uuid.uuid4().hex[:6]}")
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def crd(cluster: harness.Cluster) -> None:
    """The CRD, so that `can-i` resolves mysqls (left installed: other tests use it). Before
    1.23 the server's schema of a CRD, which kubectl checks the file against, has no
    x-kubernetes-validations (docs/install.md, "Older API servers")."""
    validate = ["--validate=false"] if cluster.server_version < (1, 23) else []
    cluster.kubectl("apply", *validate, "-f", str(REPO / "deploy" / "crd.yml"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/mysqls.otus.homework",
                    "--timeout=60s")


@pytest.fixture
def clusterwide(cluster: harness.Cluster, crd: None) -> Iterator[None]:
    yield from install(cluster, rbac_objects(cluster, "deploy"))


@pytest.fixture
def namespaced(cluster: harness.Cluster, crd: None) -> Iterator[None]:
    # deploy/namespaced/ does not create its namespace (deleting it would delete that)
    try:
        created = bool(cluster.create_namespace(OPERATOR_NAMESPACE))
    except kubernetes.client.ApiException as e:
        if e.status != 409:
            raise
        created = False
    try:
        yield from install(cluster, rbac_objects(cluster, "deploy/namespaced"))
    finally:
        if created:
            cluster.kubectl("delete", "namespace", OPERATOR_NAMESPACE, "--wait=true",
                            "--timeout=120s", check=False, timeout=150)


def needed(ns: str) -> list[Ask]:
    """What the code does in a namespace it reconciles (see the roles' tasks and the shim)."""
    yes = [
        *(Ask(v, MYSQLS, ns, True) for v in ("get", "list", "watch", "patch")),
        Ask("patch", MYSQLS, ns, True, subresource="status"),
        Ask("update", MYSQLS, ns, True, subresource="finalizers"),
        Ask("get", "events", ns, True),
        Ask("create", "events", ns, True),
        Ask("list", "events", ns, True),
        Ask("list", "pods", ns, True),
        *(Ask(v, "secrets", ns, True) for v in ("get", "create", "patch", "delete")),
        # list and watch: the dependent watches (not on Secrets)
        *(Ask(v, "services", ns, True) for v in ("get", "create", "patch", "list", "watch")),
        *(Ask(v, "persistentvolumeclaims", ns, True)
          for v in ("get", "create", "patch", "list", "watch")),
        *(Ask(v, "deployments.apps", ns, True) for v in ("get", "create", "patch", "list", "watch")),
        *(Ask(v, "jobs.batch", ns, True)
          for v in ("get", "list", "watch", "create", "patch", "delete")),
        *(Ask(v, BACKUPS, ns, True) for v in ("get", "list", "watch", "create", "patch", "delete")),
        Ask("patch", BACKUPS, ns, True, subresource="status"),
        Ask("update", BACKUPS, ns, True, subresource="finalizers"),
        *(Ask(v, RESTORES, ns, True) for v in ("get", "list", "watch", "patch")),
        Ask("patch", RESTORES, ns, True, subresource="status"),
        Ask("update", RESTORES, ns, True, subresource="finalizers"),
        *(Ask(v, "cronjobs.batch", ns, True)
          for v in ("get", "list", "watch", "create", "patch", "delete")),
        # <name>-config (spec.config)
        *(Ask(v, "configmaps", ns, True) for v in ("get", "list", "watch", "create", "patch")),
    ]
    # beyond the code's needs, in that same namespace
    no = [
        *(Ask(v, MYSQLS, ns, False) for v in ("create", "update", "delete")),
        Ask("update", MYSQLS, ns, False, subresource="status"),
        *(Ask(v, "secrets", ns, False) for v in ("list", "watch", "update")),
        *(Ask(v, "deployments.apps", ns, False) for v in ("delete", "update")),
        Ask("delete", "services", ns, False),
        Ask("delete", "persistentvolumeclaims", ns, False),
        *(Ask(v, "pods", ns, False) for v in ("create", "delete", "patch", "watch")),
        Ask("create", "pods", ns, False, subresource="exec"),
        Ask("get", "pods", ns, False, subresource="log"),
        *(Ask(v, "configmaps", ns, False) for v in ("delete", "update")),
        Ask("get", "serviceaccounts", ns, False),
        Ask("create", "roles.rbac.authorization.k8s.io", ns, False),
        Ask("create", "rolebindings.rbac.authorization.k8s.io", ns, False),
        Ask("delete", "events", ns, False),
        *(Ask(v, RESTORES, ns, False) for v in ("create", "delete")),
        Ask("update", BACKUPS, ns, False),
        Ask("update", "cronjobs.batch", ns, False),
    ]
    return yes + no


def volumes() -> list[Ask]:
    """Cluster-scoped and unavoidable: hostPath PVs and reading StorageClasses."""
    return [
        *(Ask(v, "persistentvolumes", None, True) for v in ("get", "create", "patch", "delete")),
        Ask("get", "storageclasses.storage.k8s.io", None, True),
        Ask("list", "persistentvolumes", None, False),
        Ask("delete", "storageclasses.storage.k8s.io", None, False),
    ]


def never() -> list[Ask]:
    """Cluster-scoped things neither install may do."""
    return [
        Ask("delete", "nodes", None, False),
        Ask("list", "nodes", None, False),
        Ask("delete", "namespaces", None, False),
        Ask("create", "namespaces", None, False),
        Ask("create", "clusterroles.rbac.authorization.k8s.io", None, False),
        Ask("create", "clusterrolebindings.rbac.authorization.k8s.io", None, False),
        Ask("escalate", "clusterroles.rbac.authorization.k8s.io", None, False),
        Ask("impersonate", "serviceaccounts", "kube-system", False),
        Ask("create", "customresourcedefinitions.apiextensions.k8s.io", None, False),
        Ask("delete", "customresourcedefinitions.apiextensions.k8s.io", None, False),
        Ask("list", "secrets", "kube-system", False),
        Ask("create", "pods", "kube-system", False),
    ]


def leader_election(ns: str) -> list[Ask]:
    return [
        Ask("create", "configmaps", ns, True),
        Ask("get", "configmaps", ns, True, name="mysql-operator-lock"),
        Ask("delete", "configmaps", ns, True, name="mysql-operator-lock"),
        Ask("get", "pods", ns, True),
        Ask("delete", "configmaps", ns, False, name="some-other-configmap"),
        Ask("update", "configmaps", ns, False, name="mysql-operator-lock"),
    ]


def test_clusterwide_operator_may_do_what_the_roles_need_anywhere(
        cluster: harness.Cluster, clusterwide: None, other_namespace: str) -> None:
    asks = [
        *needed(other_namespace),
        *needed("default"),
        *(Ask(v, MYSQLS, None, True, all_namespaces=True) for v in ("list", "watch")),
        *(Ask(v, "customresourcedefinitions.apiextensions.k8s.io", None, True)
          for v in ("list", "watch")),
        *volumes(),
        *never(),
        *leader_election(OPERATOR_NAMESPACE),
        # secrets anywhere by name (spec.passwordSecretRef), but never a listing of them
        Ask("list", "secrets", None, False, all_namespaces=True),
        Ask("list", "namespaces", None, False),
    ]
    assert wrong_answers(cluster, asks) == []


def test_namespaced_operator_is_confined_to_its_namespace(
        cluster: harness.Cluster, namespaced: None, other_namespace: str) -> None:
    asks = [
        *needed(OPERATOR_NAMESPACE),
        *leader_election(OPERATOR_NAMESPACE),
        *volumes(),
        *never(),
        # nothing at all in any other namespace
        *(Ask(v, "secrets", ns, False) for ns in (other_namespace, "default", "kube-system")
          for v in ("get", "create", "patch", "delete")),
        *(Ask(v, MYSQLS, other_namespace, False) for v in ("get", "list", "watch", "patch")),
        *(Ask(v, r, other_namespace, False) for v, r in (
            ("create", "deployments.apps"), ("create", "services"), ("create", "jobs.batch"),
            ("create", "persistentvolumeclaims"), ("create", "events"),
            ("create", "configmaps"), ("get", "pods"))),
        *(Ask(v, MYSQLS, None, False, all_namespaces=True) for v in ("list", "watch")),
        # no cluster-wide reads beyond the volumes: no CRDs, no namespaces
        *(Ask(v, "customresourcedefinitions.apiextensions.k8s.io", None, False)
          for v in ("list", "watch")),
        Ask("list", "namespaces", None, False),
    ]
    assert wrong_answers(cluster, asks) == []
