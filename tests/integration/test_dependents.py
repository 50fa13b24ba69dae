"""Owner references injected and dependent watches, against the real cluster, with a role written as for the Operator SDK: it sets no owner references.

The watched kind is a labelled ConfigMap (no CRD to install); its role creates a ConfigMap
`<name>-child` in the same namespace and a cluster-scoped PersistentVolume. The entry has
no reconcilePeriod, so nothing but a watch can bring the role back:
- the child gets a controller owner reference to the watched object (injected by the proxy
  between the runs and the API server), the PersistentVolume the SDK's primary-resource
  annotations;
- the child deleted by hand comes back (a new uid), and a hand edit of its data is undone;
  the operator's log says a dependent's change started those runs;
- the watched object deleted: the child goes with it (garbage collection through the
  injected reference).
The shipped watches.yaml (mysql role, which sets its own references): a MySQL object's
Service deleted by hand is re-created by a run the dependent watch started (test_operator's
steady test, which has a ready instance at hand).
"""

from __future__ import annotations

import json
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import harness
from tests.integration import operator_harness as oh

LABEL = "otus.homework/dependents-test"
ROLE = textwrap.dedent("""\
    ---
    - name: A child in the watched object's namespace (no owner reference set here)
      kubernetes.core.k8s:
        state: present
        definition:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: "{{ ansible_operator_meta.name }}-child"
            namespace: "{{ ansible_operator_meta.namespace }}"
          data:
            colour: "{{ __configmap.data.colour | default('none') }}"

    - name: A cluster-scoped child
      kubernetes.core.k8s:
        state: present
        definition:
          apiVersion: v1
          kind: PersistentVolume
          metadata:
            name: "{{ pv_name }}"
            labels:
              otus.homework/dependents-test: "pv"
          spec:
            capacity: {storage: 1Mi}
            accessModes: [ReadWriteOnce]
            storageClassName: dependents-test-none
            persistentVolumeReclaimPolicy: Retain
            hostPath: {path: /tmp/dependents-test}
    """)


@pytest.fixture(scope="module")
def namespace(cluster: harness.Cluster) -> Iterator[str]:
    with oh.module_namespace(cluster, "deps") as name:
        yield name


def test_an_sdk_role_gets_owner_references_and_its_children_are_watched(
        cluster: harness.Cluster, namespace: str, tmp_path: Path) -> None:
    ns = namespace
    pv_name = f"deps-{uuid.uuid4().hex[:8]}"
    watches = oh.role_watches(tmp_path, [{
        "version": "v1", "group": "", "kind": "ConfigMap", "role": "child",
        "selector": {"matchLabels": {LABEL: "watched"}}, "vars": {"pv_name": pv_name},
    }], {"child": ROLE})
    operator = oh.start_operator(cluster, ns, tmp_path / "operator", watches=watches)

    def child() -> dict | None:
        if not operator.alive():
            raise AssertionError(f"the operator exited:\n{operator.log()[-6000:]}")
        done = cluster.kubectl("-n", ns, "get", "configmap", "app-child", "-o", "json", check=False)
        return json.loads(done.stdout) if done.returncode == 0 else None

    def child_uid() -> str | None:
        return (child() or {}).get("metadata", {}).get("uid")

    try:
        cluster.apply(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "app", "namespace": ns, "labels": {LABEL: "watched"}},
                                  "data": {"colour": "blue"}}))
        owner = cluster.get("-n", ns, "configmap", "app")
        cluster.wait_for(lambda: child() is not None, timeout=120, what="the role to create the child")
        first = child()
        assert first is not None
        assert first["metadata"]["ownerReferences"] == [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "app", "uid": owner["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}], "no injected owner reference"
        cluster.wait_for(lambda: cluster.kubectl("get", "pv", pv_name, check=False).returncode == 0,
                         timeout=60, what="the cluster-scoped child")
        annotations = cluster.get("pv", pv_name)["metadata"].get("annotations") or {}
        assert annotations.get("operator-sdk/primary-resource") == f"{ns}/app"
        assert annotations.get("operator-sdk/primary-resource-type") == "ConfigMap."

        # deleted by hand: back, as a new object, with no period to bring it back
        cluster.kubectl("-n", ns, "delete", "configmap", "app-child")
        cluster.wait_for(lambda: child_uid() not in (None, first["metadata"]["uid"]), timeout=60,
                         what="the deleted child to be re-created by the dependent watch")
        # edited by hand: the role's content again
        cluster.kubectl("-n", ns, "patch", "configmap", "app-child", "--type=merge",
                        "-p", json.dumps({"data": {"colour": "red"}}))
        cluster.wait_for(lambda: (child() or {}).get("data") == {"colour": "blue"}, timeout=60,
                         what="the hand edit of the child to be undone")
        assert f"ConfigMap {ns}/app: an object it owns changed, reconciling" in operator.log(), \
            "the child came back, but not through a dependent watch"

        # the watched object goes: so does its child (garbage collection of the reference)
        cluster.kubectl("-n", ns, "delete", "configmap", "app")
        cluster.wait_for(lambda: child() is None, timeout=120,
                         what="the child to be garbage-collected with its owner")
    finally:
        operator.stop()
        cluster.kubectl("delete", "pv", pv_name, "--ignore-not-found", check=False)
