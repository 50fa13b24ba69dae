"""A role edited to touch something its RBAC does not allow fails with a Failure condition and a Warning Event that name the permission denied.

In a namespace of its own, the test installs the RBAC of deploy/namespaced/ moved to that
namespace (its ClusterRole and ClusterRoleBinding renamed after the namespace, so that the
real install's are never touched) and runs the operator locally as that ServiceAccount,
with its token in a kubeconfig of its own. The operator's watches map MySQL to a copy of
roles/mysql (in tmp_path: the repository is unchanged) to which one task is added, as an
edit would add it: apply a ServiceAccount for the server, which the Role does not allow
(kubernetes.core.k8s reads an object before it creates it). The task comes after the role has read the password from its
Secret (spec.passwordSecretRef) and before it creates any volume: no server is started and
the password is in the role's hands when it fails, so the leak scan means something.

test_rbac.py asks the authorizer what this ServiceAccount may do; this module shows what a
user sees when a role asks for more.
"""

from __future__ import annotations

import datetime
import json
import shutil
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import harness, kube
from tests.integration import operator_harness as oh

REPO = harness.REPO
PREFIX = "perm-"
ACCOUNT = "mysql-operator"  # deploy/operator/service_account.yaml's, in the test's namespace
# Marks what this module creates, so that a later run finds what a killed one left behind.
TEST_LABEL = "otus.homework/test"
TEST_VALUE = "permission-failure"
NAMESPACE_LABEL = "otus.homework/test-namespace"  # on the cluster-scoped objects
STALE_AFTER = datetime.timedelta(minutes=10)  # older than any run of this module (about 12 s)
NAMESPACED_KINDS = {"ServiceAccount", "Role", "RoleBinding"}
CLUSTER_KINDS = {"ClusterRole", "ClusterRoleBinding"}
ADDED_TASK = "Apply the server's ServiceAccount"
ADDED_TASKS = textwrap.dedent(f"""\
    ---
    # Added by the test, as an edit of the role would add it: an object kind the RBAC
    # of deploy/ does not cover.
    - name: {ADDED_TASK}
      kubernetes.core.k8s:
        state: present
        definition:
          apiVersion: v1
          kind: ServiceAccount
          metadata:
            name: "{{{{ mysql_instance.name }}}}-server"
            namespace: "{{{{ mysql_instance.namespace }}}}"
            labels: "{{{{ mysql_labels }}}}"
    """)
ANCHOR = "- name: Manage the backup volume\n"  # roles/mysql/tasks/main.yml: the added task goes before


def creation_time(obj: dict[str, Any]) -> datetime.datetime:
    return datetime.datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))


def sweep_stale(cluster: harness.Cluster) -> None:
    """Remove what a killed run of this module left: its namespaces older than STALE_AFTER
    (their volumes; their operator is stopped by operator_harness.start_operator) and the cluster-scoped RBAC of namespaces gone or swept."""
    selector = f"{TEST_LABEL}={TEST_VALUE}"
    now = harness.now_utc()
    live = set()
    for ns in cluster.get("namespaces", "-l", selector)["items"]:
        name = ns["metadata"]["name"]
        if now - creation_time(ns) > STALE_AFTER:
            oh.remove_namespace(cluster, name)
        else:
            live.add(name)  # perhaps a run going on now
    for kind in ("clusterrolebindings", "clusterroles"):
        for obj in cluster.get(kind, "-l", selector)["items"]:
            if obj["metadata"].get("labels", {}).get(NAMESPACE_LABEL) not in live:
                cluster.kubectl("delete", kind, obj["metadata"]["name"], "--ignore-not-found", check=False)


def rbac_objects(cluster: harness.Cluster, namespace: str) -> list[dict[str, Any]]:
    """The RBAC of deploy/namespaced/ as if installed into `namespace`: namespaced objects and
    ServiceAccount subjects moved there, cluster-scoped ones renamed `<namespace>-<name>`."""
    rendered = cluster.kubectl("kustomize", str(REPO / "deploy" / "namespaced")).stdout
    docs = [doc for doc in yaml.safe_load_all(rendered) if doc]
    kinds = {doc["kind"] for doc in docs}
    assert "Namespace" not in kinds, "deploy/namespaced/ creates a namespace: re-target it here too"
    objects = [doc for doc in docs if doc["kind"] in NAMESPACED_KINDS | CLUSTER_KINDS]
    assert {"ServiceAccount", "Role", "RoleBinding"} <= {doc["kind"] for doc in objects}, kinds
    labels = {TEST_LABEL: TEST_VALUE, NAMESPACE_LABEL: namespace}
    for obj in objects:
        meta = obj["metadata"]
        meta["labels"] = {**meta.get("labels", {}), **labels}
        if obj["kind"] in CLUSTER_KINDS:
            meta.pop("namespace", None)
            meta["name"] = f"{namespace}-{meta['name']}"
            if obj["kind"] == "ClusterRoleBinding":
                obj["roleRef"]["name"] = f"{namespace}-{obj['roleRef']['name']}"
        else:
            meta["namespace"] = namespace
        for subject in obj.get("subjects", []):
            if subject["kind"] == "ServiceAccount":
                subject["namespace"] = namespace
    return objects


def edited_watches(tmp_path: Path) -> Path:
    """A watches file mapping MySQL to a copy of roles/mysql with the added task (beside the
    role it depends on, mysql_common). No finalizer (the object goes with its namespace) and no
    periodic runs: one failure is the subject."""
    role = tmp_path / "roles" / "mysql"
    shutil.copytree(REPO / "roles" / "mysql", role)
    shutil.copytree(REPO / "roles" / "mysql_common", tmp_path / "roles" / "mysql_common")
    main = role / "tasks" / "main.yml"
    text = main.read_text()
    assert ANCHOR in text, f"roles/mysql/tasks/main.yml has no {ANCHOR.strip()!r}: move the added task"
    include = "- name: Apply the server configuration\n  ansible.builtin.import_tasks: server_config.yml\n\n"
    main.write_text(text.replace(ANCHOR, include + ANCHOR))
    (role / "tasks" / "server_config.yml").write_text(ADDED_TASKS)
    watches = tmp_path / "watches.yaml"
    watches.write_text(yaml.safe_dump([{
        "version": "v1", "group": "otus.homework", "kind": "MySQL", "role": "mysql",
        "manageStatus": True, "snakeCaseParameters": True, "markUnsafe": True,
    }]))
    return watches


@pytest.fixture
def perm_namespace(cluster: harness.Cluster) -> Iterator[str]:
    """A fresh namespace with the operator's namespaced RBAC in it; all of it removed after."""
    sweep_stale(cluster)
    oh.install_crd(cluster)
    name = cluster.create_namespace(f"{PREFIX}{uuid.uuid4().hex[:8]}", labels={TEST_LABEL: TEST_VALUE})
    cluster_scoped: list[tuple[str, str]] = []
    try:
        objects = rbac_objects(cluster, name)
        cluster_scoped = [(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] in CLUSTER_KINDS]
        cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects))
        yield name
    finally:
        oh.remove_namespace(cluster, name)
        for kind, obj in cluster_scoped:
            cluster.kubectl("delete", kind, obj, "--ignore-not-found", check=False)


def test_a_role_that_oversteps_its_rbac_fails_naming_the_permission(
        cluster: harness.Cluster, perm_namespace: str, tmp_path: Path) -> None:
    ns, name = perm_namespace, "overstep"
    password = f"perm-pw-{uuid.uuid4().hex[:12]}"
    cluster.kubectl("-n", ns, "create", "secret", "generic", "overstep-password",
                    f"--from-literal=password={password}")
    as_account = oh.service_account_kubeconfig(cluster, ns, ACCOUNT, tmp_path / "kubeconfig")
    operator = oh.start_operator(as_account, ns, tmp_path / "operator", watches=edited_watches(tmp_path))
    try:
        cluster.apply(json.dumps({
            "apiVersion": "otus.homework/v1", "kind": "MySQL",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"image": kube.LOCAL_PAUSE_IMAGE, "database": "otus", "storage_size": "1Gi",
                     "passwordSecretRef": {"name": "overstep-password", "key": "password"}},
        }))
        failure: dict[str, Any] = {}

        def failed() -> bool:
            if not operator.alive():
                raise AssertionError(f"the operator exited:\n{operator.log()[-6000:]}")
            found = oh.condition(cluster.get("-n", ns, "mysqls.otus.homework", name), "Failure")
            if found and found.get("status") == "True":
                failure.update(found)
                return True
            return False

        try:
            cluster.wait_for(failed, timeout=120, what=f"a Failure condition on MySQL {ns}/{name}", interval=1)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{oh.diagnostics(cluster, ns, operator)}") from None

        # The permission, named as the API server's authorizer names it: who, verb, resource.
        user = f'User "system:serviceaccount:{ns}:{ACCOUNT}"'
        denied = f'cannot get resource "serviceaccounts" in API group "" in the namespace "{ns}"'
        message = failure["message"]
        print(f"\nFailure condition: {message}")
        assert user in message and denied in message, message
        assert '"kind":"Status"' not in message and "b'" not in message, f"a raw API response: {message}"

        warnings = oh.wait_warning(cluster, ns, name, lambda m: ADDED_TASK in m and user in m and denied in m)
        print(f"Warning Event: {warnings[0] if warnings else None}")
        assert any(ADDED_TASK in w and user in w and denied in w for w in warnings), warnings

        # Nothing the role was not yet meant to create, the operator still runs, no password leaked.
        assert cluster.get("-n", ns, "serviceaccounts", "-l", f"app.kubernetes.io/instance={name}")["items"] == []
        assert operator.alive(), operator.log()[-6000:]
        assert password in oh.secret_values(cluster, ns)  # the scan below looks for it
        assert oh.leaks(cluster, ns, operator) == []
    finally:
        operator.stop()
