"""A tenant reaches nothing through the operator's kinds: no bucket, file or image of theirs.

The tenant is a ServiceAccount of the test's namespace bound to the ClusterRole the project
ships for namespace editors (deploy/rbac/editor_role.yaml: the kinds, never their /status),
acting with a token of its own in a kubeconfig of its own, not the admin's. It may create,
edit and delete MySQL, MySQLBackup and MySQLRestore objects there; it may not read Secrets,
create pods or Jobs, or write a record's status.

Against one instance (the local MariaDB image; what is tried here is the operator's reading of
records, the same for both servers) with `keep: 2` and verification on, the tenant writes
records that state what only the operator states: a bucket in the record's annotation (an
endpoint that is a listener of the test's own, on the node), a file of a real backup with a
database and an image of the tenant's choice, a file no Job wrote, a scheduled Job's name
that does not exist, an option-like database. Each is refused with a Failure condition and a
Warning Event naming the field; nothing connects to the listener; no pod or Job runs the
tenant's image; a restore of a refused record is refused and the rows stay; retention, after
two real backups, removes neither real backup's file (a record naming one would have been
counted and pruned in its place); no Secret value leaves its Secret, and the credentials
Secret keeps no second copy of the password (a client-side apply's annotation). An instance
named like another's object (db-direct: instance db's direct Service) is refused naming it,
and the other instance's Service stays as it was. A pod annotation of the tenant's holding
Jinja, shell and a newline reaches the pod template as written, and nothing runs.
"""

from __future__ import annotations

import json
import socket
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import figures, harness
from tests.integration import operator_harness as oh

REPO = harness.REPO
TENANT = "tenant"
EDITOR_ROLE = REPO / "deploy" / "rbac" / "editor_role.yaml"
INSTANCE = "db"
THEIR_IMAGE = "localhost/tenant-tools:1"  # an image of the tenant's choice (never pulled: never run)
TARGET_KEY = "otus.homework/backup-target"


class Listener:
    """A TCP listener on every address of this host (the local cluster's node: its pods reach
    it at the node's address) that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))  # noqa: S104 - the node's pods must be able to reach it
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.connections: list[str] = []
        self.thread = threading.Thread(target=self._accept, daemon=True, name="tenant-listener")
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, peer = self.sock.accept()
            except OSError:  # closed
                return
            self.connections.append(f"{peer[0]}:{peer[1]}")
            conn.close()

    def close(self) -> None:
        self.sock.close()


@dataclass
class Tenancy:
    cluster: harness.Cluster  # the admin's
    tenant: harness.Cluster  # the tenant's token
    ns: str
    operator: harness.Operator
    listener: Listener
    node_address: str
    refused: list[str] = field(default_factory=list)


def node_address(cluster: harness.Cluster) -> str:
    node = cluster.get("nodes")["items"][0]
    return next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")


@pytest.fixture(scope="module")
def tenancy(cluster: harness.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenancy]:
    listener = Listener()
    with oh.module_namespace(cluster, "tenancy") as ns, \
            oh.operator_in(cluster, ns, tmp_path_factory.mktemp("tenancy-operator")) as operator:
        try:
            cluster.kubectl("apply", "-f", str(EDITOR_ROLE))
            cluster.kubectl("-n", ns, "create", "serviceaccount", TENANT)
            cluster.kubectl("-n", ns, "create", "rolebinding", f"{TENANT}-edits",
                            "--clusterrole=mysql-operator-editor", f"--serviceaccount={ns}:{TENANT}")
            tenant = oh.service_account_kubeconfig(cluster, ns, TENANT,
                                                   tmp_path_factory.mktemp("tenant") / "kubeconfig")
            tenant.apply(oh.mysql_object(INSTANCE, ns, backup={"keep": 2, "verify": True}))
            oh.wait_successful(cluster, ns, INSTANCE, operator)
            oh.wait_ready(cluster, ns, INSTANCE)
            pod = oh.seed_pod(cluster, ns, INSTANCE)
            oh.seed_exec(cluster, ns, pod, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));"
                                           " INSERT INTO t VALUES (1, 'before'), (2, 'before');")
            yield Tenancy(cluster, tenant, ns, operator, listener, node_address(cluster))
        except BaseException:
            print(oh.diagnostics(cluster, ns, operator))
            raise
        finally:
            listener.close()


def record(name: str, ns: str, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> str:
    metadata: dict[str, Any] = {"name": name, "namespace": ns}
    if annotations:
        metadata["annotations"] = annotations
    return json.dumps({"apiVersion": "otus.homework/v1", "kind": "MySQLBackup", "metadata": metadata,
                       "spec": {"instance": INSTANCE, **spec}})


def rows(t: Tenancy) -> list[str]:
    pod = oh.seed_pod(t.cluster, t.ns, INSTANCE)
    return oh.seed_exec(t.cluster, t.ns, pod, "SELECT id, v FROM t ORDER BY id").split("\n")[1:-1]


def wait_refused(t: Tenancy, name: str, field_name: str) -> str:
    """Wait for the record's Failure condition; it and a Warning Event name `field_name`."""
    found: dict[str, Any] = {}

    def failed() -> bool:
        if not t.operator.alive():
            raise AssertionError(f"the operator exited:\n{t.operator.log()[-6000:]}")
        obj = oh.backup_record(t.cluster, t.ns, name)
        cond = oh.condition(obj, "Failure")
        found.update(obj)
        return bool(cond and cond.get("status") == "True")
    t.cluster.wait_for(failed, timeout=300, what=f"MySQLBackup {name} to be refused", interval=1)
    message = str((oh.condition(found, "Failure") or {}).get("message", ""))
    assert field_name in message, message
    warnings = oh.wait_warning(t.cluster, t.ns, name, lambda m: field_name in m)
    assert any(field_name in m for m in warnings), warnings
    # nothing of the record is stated as the operator's
    assert not found.get("status", {}).get("file"), found.get("status")
    t.refused.append(name)
    return message


def test_the_tenant_may_edit_the_kinds_but_not_their_status_secrets_pods_or_jobs(tenancy: Tenancy) -> None:
    t = tenancy

    def can(*args: str) -> bool:
        where = [] if "-n" in args else ["-n", t.ns]
        answer = t.tenant.kubectl("auth", "can-i", *args, *where, check=False).stdout.strip()
        return answer == "yes"
    assert can("create", "mysqlbackups.otus.homework")
    assert can("patch", "mysqls.otus.homework")
    assert can("delete", "mysqlrestores.otus.homework")
    for denied in (["patch", "mysqlbackups.otus.homework", "--subresource=status"],
                   ["patch", "mysqls.otus.homework", "--subresource=status"],
                   ["get", "secrets"], ["create", "pods"], ["create", "jobs.batch"],
                   ["create", "mysqlbackups.otus.homework", "-n", "default"]):
        assert not can(*denied), denied
    # and the API server agrees: the status of a record is not the tenant's to write
    t.tenant.apply(record("probe", t.ns, {}))
    written = t.tenant.kubectl("-n", t.ns, "patch", "mysqlbackups.otus.homework", "probe", "--subresource=status",
                               "--type=merge", "-p", '{"status":{"file":"x.sql"}}', check=False)
    assert written.returncode != 0 and "forbidden" in written.stderr.lower(), written.stderr
    oh.wait_backup_decided(t.cluster, t.ns, "probe", t.operator)


def test_a_backup_the_tenant_asks_for_is_the_instances_own(tenancy: Tenancy) -> None:
    t = tenancy
    t.tenant.apply(record("real", t.ns, {}))
    obj = oh.wait_backup_decided(t.cluster, t.ns, "real", t.operator)
    assert obj["status"]["state"] == "Complete" and oh.backup_verified(obj) == "True", obj["status"]
    assert obj["status"]["file"] == "real.sql" and obj["status"]["database"] == "otus-database"


def test_records_that_state_what_only_the_operator_states_are_refused(tenancy: Tenancy) -> None:
    t = tenancy
    their_bucket = {"endpoint": f"http://{t.node_address}:{t.listener.port}", "bucket": "loot",
                    "prefix": "x", "region": "us-east-1", "credentials_secret": f"{INSTANCE}-credentials",
                    "insecure": True, "encryption_secret": "", "url": "s3://loot/x", "archive_seconds": 0,
                    "instance": f"{t.ns}/{INSTANCE}"}
    attempts = {
        # a bucket of theirs, for a backup taken now (the root password would go with it)
        "to-their-bucket": (record("to-their-bucket", t.ns, {}, {TARGET_KEY: json.dumps(their_bucket)}),
                            f"metadata.annotations['{TARGET_KEY}']"),
        # a real backup's file, with another database and an image of theirs, "proved" by the
        # deletion Job's name
        "their-file": (record("their-file", t.ns, {"file": "real.sql", "job": f"{INSTANCE}-backup",
                                                   "database": "mysql", "image": THEIR_IMAGE}), "spec.file"),
        # a file no Job names
        "no-job": (record("no-job", t.ns, {"file": "db-20260101t000000z.sql", "image": THEIR_IMAGE}),
                   "spec.file"),
        # a scheduled run that never was
        "no-run": (record("no-run", t.ns, {"file": f"{INSTANCE}-bk-1.sql", "job": f"{INSTANCE}-bk-1",
                                           "database": "otus-database", "image": THEIR_IMAGE}), "spec.file"),
    }
    for body, _ in attempts.values():
        t.tenant.apply(body)
    for name, (_, field_name) in attempts.items():
        wait_refused(t, name, field_name)
    # an option-like database never reaches a Job: the schema refuses it, naming the field
    refused = t.tenant.kubectl("apply", "-f", "-", stdin=oh.mysql_object("opt", t.ns, database="-hevil"),
                               check=False)
    assert refused.returncode != 0 and "spec.database" in refused.stderr, refused.stderr
    t.refused.append("opt")
    # a restore of a refused record is refused, and the rows stay
    before = rows(t)
    t.tenant.apply(json.dumps({"apiVersion": "otus.homework/v1", "kind": "MySQLRestore",
                               "metadata": {"name": "from-their-file", "namespace": t.ns},
                               "spec": {"instance": INSTANCE, "backup": "their-file"}}))

    def restore_failed() -> bool:
        obj = t.cluster.get("-n", t.ns, "mysqlrestores.otus.homework", "from-their-file")
        cond = oh.condition(obj, "Failure")
        return bool(cond and cond.get("status") == "True")
    t.cluster.wait_for(restore_failed, timeout=300, what="the restore of a refused record to fail", interval=1)
    t.refused.append("from-their-file")
    assert rows(t) == before
    figures.add("bad inputs refused", len(t.refused))


def test_retention_keeps_every_real_backup_and_nothing_ran_or_connected(tenancy: Tenancy) -> None:
    t = tenancy
    t.tenant.apply(record("next", t.ns, {}))
    obj = oh.wait_backup_decided(t.cluster, t.ns, "next", t.operator)
    assert obj["status"]["state"] == "Complete" and oh.backup_verified(obj) == "True", obj["status"]
    # keep 2: real and next are the instance's two backups; the refused records, one of which
    # names real.sql, are neither counted nor pruned in their place
    directory = oh.backup_dir(t.ns, INSTANCE)
    # (the oldest real one, probe, goes: three good backups, keep 2)
    def pruned() -> bool:
        names = {r["metadata"]["name"] for r in oh.backup_records(t.cluster, t.ns, INSTANCE)}
        return "probe" not in names
    t.cluster.wait_for(pruned, timeout=300, what="retention to remove the oldest backup", interval=1)
    names = {r["metadata"]["name"] for r in oh.backup_records(t.cluster, t.ns, INSTANCE)}
    assert {"real", "next", "their-file", "no-job", "no-run", "to-their-bucket"} <= names, names
    if t.cluster.local:
        files = {p.name for p in directory.glob("*.sql")}
        assert {"real.sql", "next.sql"} <= files and "probe.sql" not in files, sorted(files)

    def counted() -> bool:
        status = t.cluster.get("-n", t.ns, "mysqls.otus.homework", INSTANCE).get("status", {})
        return int(status.get("backup", {}).get("count", 0)) == 2  # real, next
    t.cluster.wait_for(counted, timeout=120, what="the instance to count its own backups", interval=1)
    # nothing ran the tenant's image, nothing connected to the tenant's endpoint
    pods = t.cluster.get("-n", t.ns, "pods")["items"]
    jobs = t.cluster.get("-n", t.ns, "jobs")["items"]
    images = {c["image"] for p in pods for c in p["spec"].get("containers", []) + p["spec"].get("initContainers", [])}
    images |= {c["image"] for j in jobs for c in j["spec"]["template"]["spec"].get("containers", [])}
    assert THEIR_IMAGE not in images, sorted(images)
    assert not any(j["metadata"]["name"].startswith(("to-their-bucket", "their-file", "no-job", "no-run"))
                   for j in jobs), [j["metadata"]["name"] for j in jobs]
    assert t.listener.connections == [], t.listener.connections
    assert oh.leaks(t.cluster, t.ns, t.operator) == []
    secret = t.cluster.get("-n", t.ns, "secret", f"{INSTANCE}-credentials")
    assert "kubectl.kubernetes.io/last-applied-configuration" not in secret["metadata"].get("annotations", {})
    figures.add("leak scans")


def test_an_instance_named_like_anothers_object_is_refused_naming_it(tenancy: Tenancy) -> None:
    """Instance db's Service db-direct is the name instance db-direct's Service would have."""
    t = tenancy
    direct = t.cluster.get("-n", t.ns, "service", f"{INSTANCE}-direct")
    t.tenant.apply(oh.mysql_object(f"{INSTANCE}-direct", t.ns))

    def refused() -> bool:
        obj = t.cluster.get("-n", t.ns, "mysqls.otus.homework", f"{INSTANCE}-direct")
        cond = oh.condition(obj, "Failure")
        return bool(cond and cond.get("status") == "True")
    t.cluster.wait_for(refused, timeout=300, what=f"MySQL {INSTANCE}-direct to be refused", interval=1)
    obj = t.cluster.get("-n", t.ns, "mysqls.otus.homework", f"{INSTANCE}-direct")
    message = str((oh.condition(obj, "Failure") or {}).get("message", ""))
    assert f"Service {t.ns}/{INSTANCE}-direct belongs to MySQL '{INSTANCE}'" in message, message
    after = t.cluster.get("-n", t.ns, "service", f"{INSTANCE}-direct")
    assert after["spec"]["selector"] == direct["spec"]["selector"]
    assert after["metadata"]["ownerReferences"] == direct["metadata"]["ownerReferences"]
    assert t.cluster.kubectl("-n", t.ns, "get", "deployment", f"{INSTANCE}-direct", check=False).returncode != 0
    oh.wait_ready(t.cluster, t.ns, INSTANCE)
    t.refused.append(f"{INSTANCE}-direct")
    figures.add("bad inputs refused")


def test_the_tenant_reaches_no_other_namespace(tenancy: Tenancy) -> None:
    t = tenancy
    other = t.cluster.create_namespace(f"tenancy-other-{t.ns.rsplit('-', 1)[-1]}")
    try:
        body = json.loads(oh.mysql_object("theirs", other))
        refused = t.tenant.kubectl("apply", "-f", "-", stdin=json.dumps(body), check=False)
        assert refused.returncode != 0 and "forbidden" in refused.stderr.lower(), refused.stderr
        assert t.cluster.get("-n", other, "mysqls.otus.homework")["items"] == []
    finally:
        oh.remove_namespace(t.cluster, other)



def test_the_tenants_strings_are_data_never_templates_or_commands(tenancy: Tenancy) -> None:
    """A pod annotation (free text the schema admits) holding a leading '-', quotes, Jinja, a
    command substitution and a newline reaches the server's pod template as written, and nothing ran on the operator's
    host (where a Jinja lookup would run; the test's operator runs here)."""
    t = tenancy
    marker = Path(tempfile.gettempdir()) / f"tenancy-{uuid.uuid4().hex[:8]}"
    trap = (f"-e'\" {{{{ lookup('ansible.builtin.pipe', 'touch {marker}-j') }}}}\n"
            f"$(touch {marker}-s) `touch {marker}-t` {{% raw %}}")
    before = rows(t)
    t.tenant.kubectl("-n", t.ns, "patch", "mysqls.otus.homework", INSTANCE, "--type=merge",
                     "-p", json.dumps({"spec": {"podAnnotations": {"tenant.example/note": trap}}}))

    def applied() -> bool:
        template = t.cluster.get("-n", t.ns, "deployment", INSTANCE)["spec"]["template"]
        return bool(template["metadata"].get("annotations", {}).get("tenant.example/note") == trap)
    t.cluster.wait_for(applied, timeout=300, what="the tenant's annotation on the pod template, as written",
                       interval=1)
    oh.wait_ready(t.cluster, t.ns, INSTANCE)
    assert sorted(str(p) for p in marker.parent.glob(f"{marker.name}*")) == []
    assert rows(t) == before
    figures.add("bad inputs refused")
