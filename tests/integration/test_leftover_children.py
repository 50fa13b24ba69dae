"""An object re-created while the deleted one's children are still there (garbage collection
has not removed them yet) waits for them instead of taking them for its own.

Found by the fault test (API server frozen during a re-create, which stalls the garbage
collector): the new object took the old `<name>-data` claim, whose restore plan had been
fixed for the previous object, skipped its restore and reported Successful with an empty
database. Here the leftover is made to stay as long as the test wants: a `<name>-data`
claim owned by a ConfigMap. The object gets a Failure condition and a Warning Event naming
the claim; once the owner is deleted and the claim collected, the object creates its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests import harness, kube
from tests.integration import operator_harness as oh


@pytest.fixture(scope="module")
def leftover_namespace(cluster: harness.Cluster) -> Iterator[str]:
    with oh.module_namespace(cluster, "leftover") as name:
        yield name


def test_a_re_created_object_waits_for_the_deleted_ones_data_claim(
        cluster: harness.Cluster, leftover_namespace: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    ns, name = leftover_namespace, "again"
    cluster.apply(json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "previous-owner", "namespace": ns}}))
    owner = cluster.get("-n", ns, "configmap", "previous-owner")["metadata"]["uid"]
    cluster.apply(json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"{name}-data", "namespace": ns,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "previous-owner",
                                          "uid": owner}]},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "resources": {"requests": {"storage": "1Gi"}}},
    }))
    with oh.operator_in(cluster, ns, tmp_path_factory.mktemp("leftover-operator")) as operator:
        cluster.apply(oh.mysql_object(name, ns, image=kube.LOCAL_PAUSE_IMAGE))

        def failed() -> bool:
            found = oh.condition(cluster.get("-n", ns, "mysqls.otus.homework", name), "Failure") or {}
            return found.get("status") == "True"

        cluster.wait_for(failed, timeout=120, what="a Failure condition while the old claim is there", interval=1)
        failure = oh.condition(cluster.get("-n", ns, "mysqls.otus.homework", name), "Failure") or {}
        assert f"{name}-data" in failure["message"] and owner in failure["message"], failure
        assert any(f"{name}-data" in m for m in oh.wait_warning(cluster, ns, name, lambda m: f"{name}-data" in m))
        claim = cluster.get("-n", ns, "pvc", f"{name}-data")
        assert [o["uid"] for o in claim["metadata"]["ownerReferences"]] == [owner]  # not taken over

        # Once the old claim has been collected, the object creates its own (the server itself
        # is not the subject: the pause image never takes a password).
        cluster.kubectl("-n", ns, "delete", "configmap", "previous-owner")
        uid = cluster.get("-n", ns, "mysqls.otus.homework", name)["metadata"]["uid"]

        def own_claim() -> bool:
            if not operator.alive():
                raise AssertionError(f"the operator exited:\n{operator.log()[-6000:]}")
            found = cluster.kubectl("-n", ns, "get", "pvc", f"{name}-data", "-o", "json", check=False)
            owners = json.loads(found.stdout)["metadata"].get("ownerReferences", []) if found.returncode == 0 else []
            return [o["uid"] for o in owners] == [uid]

        cluster.wait_for(own_claim, timeout=180, what="the object's own data claim", interval=1)
