"""The role-only example kinds (examples/): Database and AppService under the real operator.

One operator process (`python -m ansible_kopf`, out of cluster) serves both kinds in a
namespace of this module, from a watches file made of the examples' own entries: each
entry as shipped, with `role:` made absolute and, on the local cluster (which cannot pull
images), `vars:` replacing the images with ones it has. The roles' defaults stay the
seeds' images (mongo:4.0, mysql:8.0, busybox). No Python of the operator knows these kinds.
"""

from __future__ import annotations

import base64
import json
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import harness, kube
from tests.integration import operator_harness as oh

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
DATABASES = "databases.zalando.org"
APPSERVICES = "appservices.app.example.com"

# Images the local cluster has, for the roles' image variables: Oracle MySQL for the mysql
# type, the pause image for mongo (no mongo image exists there: the objects are checked,
# not a mongo server), Debian's sleep in the MariaDB image for busybox's.
LOCAL_IMAGES = {
    "database_mysql_image": kube.LOCAL_SERVER_IMAGES["mysql"],
    "database_mongo_image": kube.LOCAL_PAUSE_IMAGE,
    "appservice_image": kube.LOCAL_SERVER_IMAGES["mariadb"],
}
SEED_IMAGES = {"database_mysql_image": "mysql:8.0", "database_mongo_image": "mongo:4.0",
               "appservice_image": "busybox"}


@dataclass
class Examples:
    cluster: harness.Cluster
    namespace: str
    operator: harness.Operator
    images: dict[str, str]

    def get(self, resource: str, name: str) -> dict[str, Any]:
        return dict(self.cluster.get("-n", self.namespace, resource, name))

    def pods(self, selector: str) -> list[dict[str, Any]]:
        return list(self.cluster.get("-n", self.namespace, "pods", "-l", selector)["items"])

    def wait_status(self, resource: str, name: str, what: str, check: Any, timeout: float = 240) -> dict[str, Any]:
        """Wait for Successful=True at the current generation and `check(obj)`; return the object."""
        found: dict[str, Any] = {}

        def done() -> bool:
            if not self.operator.alive():
                raise AssertionError(f"the operator exited:\n{self.operator.log()[-6000:]}")
            obj = self.get(resource, name)
            ok = oh.condition(obj, "Successful") or {}
            status = obj.get("status", {})
            if (ok.get("status") == "True" and status.get("observedGeneration") == obj["metadata"]["generation"]
                    and check(obj)):
                found.update(obj)
                return True
            return False

        try:
            self.cluster.wait_for(done, timeout=timeout, what=f"{resource} {name}: {what}", interval=1)
        except AssertionError as e:
            raise AssertionError(f"{e}\nlast object: {json.dumps(self.get(resource, name))[-3000:]}") from None
        return found

    def wait_gone_or_going(self, kind: str, name: str) -> None:
        """Wait until garbage collection removed `name` or marked it for deletion."""
        def gone() -> bool:
            done = self.cluster.kubectl("-n", self.namespace, "get", kind, name, "-o", "json", check=False)
            return done.returncode != 0 or "deletionTimestamp" in json.loads(done.stdout)["metadata"]
        self.cluster.wait_for(gone, timeout=120, what=f"{kind} {name} to be garbage-collected")


def example_watches(images: dict[str, str]) -> list[dict[str, Any]]:
    """The examples' watches entries, roles by absolute path, images replaced by `images`."""
    entries = []
    for example, role, keys in (("database", "database", ("database_mysql_image", "database_mongo_image")),
                                ("appservice", "appservice", ("appservice_image",))):
        for entry in yaml.safe_load((EXAMPLES / example / "watches.yaml").read_text()):
            assert entry["role"] == role, entry
            entry["role"] = str(EXAMPLES / example / "roles" / role)
            entry["vars"] = {**entry.get("vars", {}), **{k: images[k] for k in keys}}
            entries.append(entry)
    return entries


@pytest.fixture(scope="module")
def examples(cluster: harness.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Examples]:
    for example, crd in (("database", DATABASES), ("appservice", APPSERVICES)):
        cluster.kubectl("apply", "-f", str(EXAMPLES / example / "crd.yaml"))
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    namespace = cluster.create_namespace(f"examples-{uuid.uuid4().hex[:8]}")
    images = LOCAL_IMAGES if cluster.local else SEED_IMAGES
    workdir = tmp_path_factory.mktemp("examples-operator")
    watches = workdir / "watches.yaml"
    watches.write_text("---\n" + yaml.safe_dump(example_watches(images), sort_keys=False))
    operator = oh.start_operator(cluster, namespace, workdir, watches=watches)
    found = Examples(cluster=cluster, namespace=namespace, operator=operator, images=images)
    try:
        yield found
    finally:
        operator.stop()
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        shutil.rmtree(workdir / "runner", ignore_errors=True)


def sample(example: str, namespace: str, name: str | None = None, **spec: Any) -> dict[str, Any]:
    obj = dict(yaml.safe_load((EXAMPLES / example / "sample.yaml").read_text()))
    obj["metadata"] = {**obj["metadata"], "namespace": namespace, **({"name": name} if name else {})}
    obj["spec"] = {**obj["spec"], **spec}
    return obj


def owner_uids(obj: dict[str, Any]) -> list[str]:
    return [ref["uid"] for ref in obj["metadata"].get("ownerReferences", []) if ref.get("controller")]


# --- Database -------------------------------------------------------------------------------


def test_database_mysql_pod_service_and_secret(examples: Examples) -> None:
    ex, ns = examples, examples.namespace
    obj = sample("database", ns)
    name = obj["metadata"]["name"]
    assert obj["spec"] == {"type": "mysql"}
    ex.cluster.apply(json.dumps(obj))
    try:
        db = ex.wait_status(DATABASES, name, "the tutorial's message",
                            lambda o: o["status"].get("message") == f"Pod and Service created by Database {name}")
        uid = db["metadata"]["uid"]
        pod, svc, secret = ex.get("pod", name), ex.get("service", name), ex.get("secret", f"{name}-root")
        container = pod["spec"]["containers"][0]
        assert container["image"] == ex.images["database_mysql_image"]
        assert [p["containerPort"] for p in container["ports"]] == [3306]
        assert container["env"] == [{"name": "MYSQL_ROOT_PASSWORD", "valueFrom": {
            "secretKeyRef": {"name": f"{name}-root", "key": "root-password"}}}]
        password = base64.b64decode(secret["data"]["root-password"]).decode()
        assert len(password) == 24 and password.isalnum()
        assert password not in json.dumps(pod), "the root password is a literal in the Pod"
        assert svc["spec"]["type"] == "NodePort"
        assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(3306, "mysql")]
        assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
        assert db["status"]["service"] == {"name": name, "type": "NodePort", "port": 3306,
                                           "nodePort": svc["spec"]["ports"][0]["nodePort"]}
        for child in (pod, svc, secret):
            assert owner_uids(child) == [uid], child["metadata"]
        # The printer column and the short names.
        table = ex.cluster.kubectl("-n", ns, "get", "db").stdout
        assert table.split("\n")[0].split()[:2] == ["NAME", "TYPE"] and f"{name}   mysql" in table, table
        assert name in ex.cluster.kubectl("-n", ns, "get", "dbs", "-o", "name").stdout

        # The server accepts the Secret's password (read by the pod from its environment).
        def login() -> bool:
            done = ex.cluster.kubectl(
                "-n", ns, "exec", name, "--", "sh", "-c",
                'MYSQL_PWD="$MYSQL_ROOT_PASSWORD" exec mysql -uroot -h127.0.0.1 -N -e "SELECT 6*7"',
                check=False, timeout=60)
            return done.returncode == 0 and done.stdout.strip() == "42"
        ex.cluster.wait_for(login, timeout=240, what="the MySQL server to accept the Secret's password",
                            interval=3)
    except BaseException:
        print(ex.operator.log()[-8000:])
        raise

    ex.cluster.kubectl("-n", ns, "delete", DATABASES, name, "--wait=true", "--timeout=60s", timeout=90)
    for kind, child in (("pod", name), ("service", name), ("secret", f"{name}-root")):
        ex.wait_gone_or_going(kind, child)


def test_database_mongo_then_type_change(examples: Examples) -> None:
    ex, ns, name = examples, examples.namespace, "typed-db"
    ex.cluster.apply(json.dumps(sample("database", ns, name=name, type="mongo")))
    try:
        db = ex.wait_status(DATABASES, name, "Successful", lambda o: "service" in o["status"])
        assert db["status"]["message"] == f"Pod and Service created by Database {name}"
        pod, svc = ex.get("pod", name), ex.get("service", name)
        container = pod["spec"]["containers"][0]
        assert container["image"] == ex.images["database_mongo_image"]
        assert [p["containerPort"] for p in container["ports"]] == [27017]
        assert "env" not in container
        assert [p["port"] for p in svc["spec"]["ports"]] == [27017]
        assert ex.cluster.kubectl("-n", ns, "get", "secret", f"{name}-root", check=False).returncode != 0

        # A changed type replaces the Pod and the Service's port (not a second port beside it).
        ex.cluster.kubectl("-n", ns, "patch", DATABASES, name, "--type=merge", "-p", '{"spec":{"type":"mysql"}}')
        ex.wait_status(DATABASES, name, "the mysql type applied",
                       lambda o: o["status"].get("service", {}).get("port") == 3306)
        pod, svc = ex.get("pod", name), ex.get("service", name)
        assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == "mysql"
        assert [p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]] == [3306]
        assert [p["port"] for p in svc["spec"]["ports"]] == [3306]
        assert owner_uids(ex.get("secret", f"{name}-root")) == [db["metadata"]["uid"]]
    except BaseException:
        print(ex.operator.log()[-8000:])
        raise
    ex.cluster.kubectl("-n", ns, "delete", DATABASES, name, "--wait=true", "--timeout=60s", timeout=90)
    ex.wait_gone_or_going("pod", name)


@pytest.mark.parametrize(("example", "spec", "words"), [
    ("database", {"type": "postgres"}, ['spec.type: Unsupported value: "postgres"', '"mongo", "mysql"']),
    ("database", {}, ["spec.type: Required value"]),
    ("appservice", {"replicas": -1}, ["spec.replicas", "should be greater than or equal to 0"]),
    ("appservice", {"replicas": "three"}, ["spec.replicas", "must be of type integer"]),
])
def test_bad_spec_is_refused_naming_the_field(examples: Examples, example: str, spec: dict[str, Any],
                                              words: list[str]) -> None:
    obj = sample(example, examples.namespace, name=f"bad-{uuid.uuid4().hex[:6]}")
    obj["spec"] = spec
    # --validate=false: the API server's refusal, which every client gets, not kubectl's.
    done = examples.cluster.kubectl("apply", "--validate=false", "-f", "-", stdin=json.dumps(obj), check=False)
    assert done.returncode != 0, done.stdout
    for word in words:
        assert word in done.stderr, done.stderr


# --- AppService -----------------------------------------------------------------------------


def test_appservice_scales_one_pod_per_reconcile(examples: Examples) -> None:
    ex, ns = examples, examples.namespace
    obj = sample("appservice", ns)
    name = obj["metadata"]["name"]
    selector = f"app={name},version=v0.1"

    def live() -> list[str]:
        return sorted(p["metadata"]["name"] for p in ex.pods(selector)
                      if "deletionTimestamp" not in p["metadata"]
                      and p["status"].get("phase") in ("Pending", "Running"))

    def settled(count: int) -> Any:
        def check(o: dict[str, Any]) -> bool:
            status = o.get("status", {})
            return bool(status.get("replicas") == count and status.get("podNames") == live()
                        and len(status["podNames"]) == count)
        return check

    assert obj["spec"] == {"replicas": 3}
    ex.cluster.apply(json.dumps(obj))
    try:
        app = ex.wait_status(APPSERVICES, name, "3 pods", settled(3))
        pods = [p for p in ex.pods(selector) if "deletionTimestamp" not in p["metadata"]]
        assert len(pods) == 3
        for pod in pods:
            assert pod["metadata"]["name"].startswith(f"{name}-pod-")
            container = pod["spec"]["containers"][0]
            assert (container["image"], container["command"]) == (ex.images["appservice_image"], ["sleep", "3600"])
            assert owner_uids(pod) == [app["metadata"]["uid"]]
        first = app["status"]["podNames"]

        for count in (1, 2):
            ex.cluster.kubectl("-n", ns, "patch", APPSERVICES, name, "--type=merge",
                               "-p", json.dumps({"spec": {"replicas": count}}))
            app = ex.wait_status(APPSERVICES, name, f"{count} pods", settled(count))
        # Down to one kept one of the first three; up to two added a new pod beside it.
        assert len(set(app["status"]["podNames"]) & set(first)) == 1, (first, app["status"])
        table = ex.cluster.kubectl("-n", ns, "get", APPSERVICES, name).stdout
        assert table.split("\n")[1].split()[1:3] == ["2", "2"], table

        # Kept at that count: a pod deleted by hand is replaced by a new one.
        doomed = app["status"]["podNames"][0]
        ex.cluster.kubectl("-n", ns, "delete", "pod", doomed, "--wait=false")
        app = ex.wait_status(APPSERVICES, name, "a replacement pod",
                             lambda o: settled(2)(o) and doomed not in o["status"]["podNames"])
    except BaseException:
        print(ex.operator.log()[-8000:])
        raise

    remaining = live()
    ex.cluster.kubectl("-n", ns, "delete", APPSERVICES, name, "--wait=true", "--timeout=60s", timeout=90)
    for pod_name in remaining:
        ex.wait_gone_or_going("pod", pod_name)
