"""End-to-end tests of the operator (kopf shim + watches.yaml + mysql roles) on a real cluster.

The operator runs as a real process against the real API server, watching one namespace
made for this module. MySQL is a real server: the tests that touch it run for every server
image at once, a thread each (`oh.for_each_server`: the local cluster's MariaDB and Oracle
MySQL images, or `$TEST_MYSQL_IMAGE`), sharing the namespace and the operator; rows are written and read
by Job pods of the same image that reach it by its service's DNS name, and by
`kubectl exec` as the seed walkthrough does.
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest

from ansible_kopf.run import summary
from tests import harness, kube
from tests.integration import operator_harness as oh


def restart_and_wait_for_run(cluster: harness.Cluster, operator: harness.Operator, ns: str,
                             name: str) -> summary.Summary:
    """Restart the operator: kopf resumes the object, one full run of the role; its summary."""
    operator.stop()
    operator.start()

    def runs() -> list[summary.Summary]:
        return [s for s in operator.summaries(since_start=True)
                if s.action == "reconcile" and (s.namespace, s.name) == (ns, name)]
    cluster.wait_for(lambda: bool(runs()), timeout=180, what="the resumed run to finish", interval=1)
    return runs()[0]


PERIOD_ANNOTATION = "ansible.sdk.operatorframework.io/reconcile-period"  # the SDK's, per object


def _mode_or_zero(path: Path) -> int:
    """The file's mode bits, 0 when it is gone (its run ended and removed it)."""
    try:
        return path.stat().st_mode
    except FileNotFoundError:
        return 0


def _read_or_empty(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _secret_value(cluster: harness.Cluster, namespace: str, name: str, key: str = "password") -> str:
    data = cluster.get("-n", namespace, "secret", name)["data"]
    return base64.b64decode(data[key]).decode()


@pytest.mark.usefixtures("explain")
def test_rows_survive_delete_and_recreate(cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:
    """The seed walkthrough: rows written with its own kubectl commands survive delete and apply."""

    def one(server: oh.Server) -> None:
        ns, name = op_namespace, server.name("lifecycle")
        host = f"{name}.{ns}.svc.cluster.local"
        cluster.apply(oh.mysql_object(name, ns, image=server.image))
        created = oh.wait_successful(cluster, ns, name, operator)
        assert "without restore-job" in str(created["status"]), created["status"]
        ready = oh.condition(created, "Ready")
        assert ready is not None and ready["status"] == "True" and ready["reason"] == "LoginAccepted", ready
        oh.wait_ready(cluster, ns, name)
        pods = cluster.get("-n", ns, "pods", "-l", f"app.kubernetes.io/instance={name}")["items"]
        assert any(all(c["ready"] for c in p["status"].get("containerStatuses", [])) for p in pods)
        printed = cluster.kubectl("-n", ns, "get", "ms", name).stdout
        assert printed.split("\n")[0].split()[:3] == ["NAME", "READY", "STATUS"], printed
        assert printed.split("\n")[1].split()[:3] == [name, "True", "True"], printed

        rows = [f"row-{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
        values = ", ".join(f"({i}, '{v}')" for i, v in enumerate(rows))
        pod = oh.seed_pod(cluster, ns, name)
        oh.seed_exec(cluster, ns, pod, "CREATE TABLE test (id INT PRIMARY KEY, name VARCHAR(64));")
        oh.seed_exec(cluster, ns, pod, f"INSERT INTO test VALUES {values};")

        cluster.kubectl("-n", ns, "delete", "mysqls.otus.homework", name, "--timeout=300s", timeout=330)
        backup = cluster.get("-n", ns, "job", f"{name}-backup")
        assert backup["status"].get("succeeded") == 1, backup["status"]
        # The owned children go with the object (garbage collection); the backup storage stays.
        cluster.wait_for(lambda: cluster.kubectl("-n", ns, "get", "secret,deploy,svc,pvc", "-o", "name",
                                                         "-l", f"app.kubernetes.io/instance={name}", check=False).stdout.split()
                         == [f"persistentvolumeclaim/{name}-backup"], timeout=120, what="the children to be collected")
        assert cluster.get("-n", ns, "pvc", f"{name}-backup")["status"]["phase"] == "Bound"

        cluster.apply(oh.mysql_object(name, ns, image=server.image))
        recreated = oh.wait_successful(cluster, ns, name, operator)
        oh.wait_ready(cluster, ns, name)
        assert "with restore-job" in str(recreated["status"]) and "without" not in str(recreated["status"])
        restore = cluster.get("-n", ns, "job", f"{name}-restore")
        assert restore["status"].get("succeeded") == 1, restore["status"]

        out = oh.sql_job(cluster, ns, host, "otus-database", "SELECT id, name FROM test ORDER BY id;",
                         secret=f"{name}-credentials", image=server.image)
        assert [line.split("\t") for line in out.strip().splitlines()] == [[str(i), v] for i, v in enumerate(rows)]
        printed = oh.seed_exec(cluster, ns, oh.seed_pod(cluster, ns, name), "select * from test;")
        assert [line.split("\t") for line in printed.strip().splitlines()] == [
            ["id", "name"], *([str(i), v] for i, v in enumerate(rows))], printed
        jobs = {j["metadata"]["name"]: j["status"].get("succeeded") for j in cluster.get("-n", ns, "jobs")["items"]}
        assert jobs.get(f"{name}-backup") == 1 and jobs.get(f"{name}-restore") == 1, jobs

    oh.for_each_server(one)


def test_schema_rejects_bad_input(cluster: harness.Cluster, op_namespace: str) -> None:
    oh.install_crd(cluster)
    missing = oh.mysql_object("bad-missing", op_namespace).replace('"database": "otus-database", ', "")
    done = cluster.kubectl("create", "--validate=false", "-f", "-", stdin=missing, check=False)
    assert done.returncode != 0 and "spec.database: Required value" in done.stderr, done.stderr

    bad_size = oh.mysql_object("bad-size", op_namespace, storage_size="lots")
    done = cluster.kubectl("create", "--validate=false", "-f", "-", stdin=bad_size, check=False)
    assert done.returncode != 0 and "spec.storage_size" in done.stderr, done.stderr

    no_password = oh.mysql_object("bad-nopw", op_namespace).replace('"password": "otuspassword", ', "")
    done = cluster.kubectl("create", "--validate=false", "-f", "-", stdin=no_password, check=False)
    assert done.returncode != 0, "an object with neither password nor passwordSecretRef was accepted"


@pytest.mark.usefixtures("explain")
def test_template_and_shell_syntax_is_stored_literally(cluster: harness.Cluster, op_namespace: str,
                                                       operator: harness.Operator) -> None:
    """A password with Jinja, shell and SQL quoting (a single quote among them) is stored and
    used as that text: the server accepts it for root over TCP and the socket and for the
    application user, and root has no empty password (the official MySQL image's entrypoint,
    given such a password directly, leaves exactly that half-initialised server)."""

    def one(server: oh.Server) -> None:
        ns, name = op_namespace, server.name("literal")
        marker = f"/tmp/lit-{uuid.uuid4().hex[:6]}"  # the password has at most 128 characters
        password = f"{{{{ lookup('pipe','touch {marker}-j') }}}}$(touch {marker}-s)`touch {marker}-t`'\";{{% raw %}}"
        executed = lambda: sorted(str(p) for p in Path("/tmp").glob(f"{Path(marker).name}*"))  # noqa: E731
        cluster.apply(oh.mysql_object(name, ns, password=password, image=server.image))
        oh.wait_successful(cluster, ns, name, operator)
        oh.wait_ready(cluster, ns, name)
        assert _secret_value(cluster, ns, f"{name}-credentials") == password
        assert executed() == [], "something in the spec was executed"
        # The server accepts the literal password (the Job reads it from the Secret).
        host = f"{name}.{ns}.svc.cluster.local"
        out = oh.sql_job(cluster, ns, host, "otus-database", "SELECT 42;", secret=f"{name}-credentials",
                         image=server.image)
        assert out.strip() == "42"
        out = oh.sql_job(cluster, ns, host, "otus-database", "SELECT CURRENT_USER();", secret=f"{name}-credentials",
                         user="app", image=server.image)
        assert out.strip().startswith("app@"), out
        pod = oh.seed_pod(cluster, ns, name)
        assert oh.seed_exec(cluster, ns, pod, "SELECT CURRENT_USER();", password=password).split() == [
            "CURRENT_USER()", "root@localhost"]
        empty = cluster.kubectl("-n", ns, "exec", pod, "--", "mysql", "-uroot", "--password=", "-e", "SELECT 1",
                                check=False)
        assert empty.returncode != 0 and "Access denied" in empty.stderr, (empty.stdout, empty.stderr)
        assert executed() == []

    oh.for_each_server(one)


@pytest.mark.usefixtures("explain")
def test_unchanged_object_reconciles_without_changes(cluster: harness.Cluster, op_namespace: str,
                                                     operator: harness.Operator) -> None:
    ns, name = op_namespace, "steady"
    cluster.apply(oh.mysql_object(name, ns))
    oh.wait_successful(cluster, ns, name, operator)
    oh.wait_ready(cluster, ns, name)

    restart_and_wait_for_run(cluster, operator, ns, name)  # the status may catch up with the server
    before = cluster.get("-n", ns, "mysqls.otus.homework", name)
    since = harness.now_utc()
    run = restart_and_wait_for_run(cluster, operator, ns, name)
    assert run.status == "successful", run
    assert run.counts.get("changed") == 0, run
    assert run.counts.get("failures") == 0, run
    if cluster.local:
        # Writes by the operator (kopf and the Python client that the shim and kubernetes.core use).
        writes = [f"{w['verb']} {w['objectRef'].get('resource')}/{w['objectRef'].get('name')}"
                  for w in harness.AuditLog().writes(ns, start=since, events=False)
                  if w.get("userAgent", "").startswith(("kopf/", "OpenAPI-Generator/"))
                  and str(w["objectRef"].get("name", "")).startswith(name)]
        assert writes == [], writes
    after = cluster.get("-n", ns, "mysqls.otus.homework", name)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    # A child deleted by hand is put back by a run its dependent watch starts, not
    # only at the next period: the operator's log names the reason.
    uid = cluster.get("-n", ns, "service", name)["metadata"]["uid"]
    cluster.kubectl("-n", ns, "delete", "service", name)

    def service_back() -> bool:
        done = cluster.kubectl("-n", ns, "get", "service", name, "-o", "json", check=False)
        return done.returncode == 0 and json.loads(done.stdout)["metadata"]["uid"] != uid

    cluster.wait_for(service_back, timeout=120, what="the deleted Service to be re-created")
    assert f"MySQL {ns}/{name}: an object it owns changed, reconciling" in operator.log(), \
        "the Service came back without the dependent watch"


@pytest.mark.usefixtures("explain")
def test_password_rotation(cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:

    def one(server: oh.Server) -> None:
        ns, name = op_namespace, server.name("rotate")
        host = f"{name}.{ns}.svc.cluster.local"
        old_login = f"old-login-{server.key}"
        cluster.apply(oh.mysql_object(name, ns, password="previous-pw-1", image=server.image))
        oh.wait_successful(cluster, ns, name, operator)
        oh.wait_ready(cluster, ns, name)
        cluster.kubectl("-n", ns, "create", "secret", "generic", old_login, "--from-literal=password=previous-pw-1")
        oh.sql_job(cluster, ns, host, "otus-database", "SELECT 1;", secret=old_login, image=server.image)
        before = oh.server_pod(cluster, ns, name)

        cluster.kubectl("-n", ns, "patch", "mysqls.otus.homework", name, "--type=merge", "-p", '{"spec": {"password": "new-pass\'word"}}')
        oh.wait_successful(cluster, ns, name, operator)
        assert _secret_value(cluster, ns, f"{name}-credentials") == "new-pass'word"
        # The password changed inside the running server: the same pod, never restarted, Ready
        # (its probe logs in with the health account, and as root with its copy of the Secret).
        oh.wait_ready(cluster, ns, name)
        assert oh.server_pod(cluster, ns, name) == before
        cluster.wait_for(lambda: oh.ready_condition(cluster, ns, name).get("reason") == "LoginAccepted",
                         timeout=120, what="the Ready condition to follow the Deployment", interval=2)
        out = oh.sql_job(cluster, ns, host, "otus-database", "SELECT CURRENT_USER();", secret=f"{name}-credentials",
                         image=server.image, wait_for_server=True)
        assert out.strip().startswith("root@")
        out = oh.sql_job(cluster, ns, host, "otus-database", "SELECT 1;", secret=f"{name}-credentials", user="app",
                         image=server.image, wait_for_server=True)
        assert out.strip() == "1"
        denied = oh.sql_job(cluster, ns, host, "otus-database", "SELECT 1;", secret=old_login, expect_success=False,
                            image=server.image, wait_for_server=True)
        assert "Access denied" in denied, denied

    oh.for_each_server(one)


@pytest.mark.usefixtures("explain")
def test_password_rotation_through_the_referenced_secret(cluster: harness.Cluster, op_namespace: str,
                                                         operator: harness.Operator) -> None:
    """
    spec.passwordSecretRef: the operator does not watch the user's Secret; the periodic
    reconcile notices the edit and rotates the password inside the server, then in
    <name>-credentials. The shipped period is an hour; this object sets 15 s with the
    SDK's per-object annotation.
    """

    def one(server: oh.Server) -> None:
        ns, name = op_namespace, server.name("refrotate")
        host = f"{name}.{ns}.svc.cluster.local"
        ref, first_login = f"ref-root-{server.key}", f"first-login-{server.key}"
        cluster.kubectl("-n", ns, "create", "secret", "generic", ref, "--from-literal=password=first-pass")
        cluster.kubectl("-n", ns, "create", "secret", "generic", first_login, "--from-literal=password=first-pass")
        body = oh.mysql_object(name, ns, image=server.image).replace(
            '"password": "otuspassword"', '"passwordSecretRef": {"name": "%s"}' % ref).replace(
            '"metadata": {', '"metadata": {"annotations": {"%s": "15s"}, ' % PERIOD_ANNOTATION)
        cluster.apply(body)
        oh.wait_successful(cluster, ns, name, operator)
        oh.wait_ready(cluster, ns, name)
        assert _secret_value(cluster, ns, f"{name}-credentials") == "first-pass"
        oh.sql_job(cluster, ns, host, "otus-database", "SELECT 1;", secret=first_login, image=server.image)

        new = base64.b64encode(b"second pass'word").decode()
        generation = cluster.get("-n", ns, "deployment", name)["metadata"]["generation"]
        before = oh.server_pod(cluster, ns, name)
        cluster.kubectl("-n", ns, "patch", "secret", ref, "--type=merge", "-p", json.dumps({"data": {"password": new}}))
        cluster.wait_for(lambda: _secret_value(cluster, ns, f"{name}-credentials") == "second pass'word",
                         timeout=240, what="the periodic reconcile to rotate the password", interval=3)
        # rotated inside the running server: no new pod template, the same pod, Ready
        oh.wait_ready(cluster, ns, name)
        assert cluster.get("-n", ns, "deployment", name)["metadata"]["generation"] == generation
        assert oh.server_pod(cluster, ns, name) == before
        out = oh.sql_job(cluster, ns, host, "otus-database", "SELECT CURRENT_USER();", secret=f"{name}-credentials",
                         image=server.image, wait_for_server=True)
        assert out.strip().startswith("root@")
        denied = oh.sql_job(cluster, ns, host, "otus-database", "SELECT 1;", secret=first_login, expect_success=False,
                            image=server.image, wait_for_server=True)
        assert "Access denied" in denied, denied
        obj = cluster.get("-n", ns, "mysqls.otus.homework", name)
        assert "second pass" not in json.dumps(obj.get("status", {}))

    oh.for_each_server(one)


@pytest.mark.usefixtures("explain")
def test_bad_reference_reports_failure_condition_and_event(cluster: harness.Cluster, op_namespace: str,
                                                            operator: harness.Operator) -> None:
    ns, name = op_namespace, "badref"
    body = oh.mysql_object(name, ns).replace('"password": "otuspassword"',
                                             '"passwordSecretRef": {"name": "no-such-secret"}')
    cluster.apply(body)

    def failed() -> bool:
        cond = oh.condition(cluster.get("-n", ns, "mysqls.otus.homework", name), "Failure")
        return bool(cond and cond["status"] == "True")
    cluster.wait_for(failed, timeout=180, what="the Failure condition", interval=2)
    cond = oh.condition(cluster.get("-n", ns, "mysqls.otus.homework", name), "Failure")
    assert cond is not None
    assert "spec.passwordSecretRef" in cond["message"], cond
    warnings = oh.wait_warning(cluster, ns, name, lambda m: "spec.passwordSecretRef" in m)
    assert any("spec.passwordSecretRef" in m for m in warnings), warnings
    # Fixing the input lets the object converge.
    cluster.kubectl("-n", ns, "create", "secret", "generic", "no-such-secret", "--from-literal=password=fixed-pw")
    oh.wait_successful(cluster, ns, name, operator, timeout=600)


@pytest.mark.usefixtures("explain")
def test_failed_secret_write_names_the_secret_and_never_shows_the_password(
        cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:
    """The role applies the credentials Secret with its other objects in one no_log call.

    A ResourceQuota that admits no more Secrets makes that Secret's write fail: the run
    fails with a message naming the Secret, the other objects are applied, and the
    password appears in no condition, Event, operator log line, runner artifact or pod spec.
    Removing the quota lets the object converge.
    """
    ns, name = op_namespace, "quota"
    password = f"pw-{uuid.uuid4().hex}"
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-more-secrets", "namespace": ns},
             "spec": {"hard": {"secrets": str(len(cluster.get("-n", ns, "secrets")["items"]))}}}
    cluster.apply(json.dumps(quota))
    try:
        # Until the quota controller has counted, admission rejects every Secret anyway.
        cluster.wait_for(lambda: "secrets" in cluster.get("-n", ns, "resourcequota", "no-more-secrets")
                         .get("status", {}).get("used", {}), timeout=60, what="the quota to be counted")
        cluster.apply(oh.mysql_object(name, ns, password=password))

        def failed() -> bool:
            cond = oh.condition(cluster.get("-n", ns, "mysqls.otus.homework", name), "Failure")
            return bool(cond and cond["status"] == "True")
        cluster.wait_for(failed, timeout=180, what="the Failure condition", interval=2)
        cond = oh.condition(cluster.get("-n", ns, "mysqls.otus.homework", name), "Failure")
        assert cond is not None and f"Secret {ns}/{name}-credentials" in cond["message"], cond
        # Everything but the Secret was applied in the same call.
        assert cluster.get("-n", ns, "deployment", name)["metadata"]["name"] == name
        assert cluster.get("-n", ns, "service", name)["metadata"]["name"] == name
        assert cluster.get("-n", ns, "pvc", f"{name}-data")["metadata"]["name"] == f"{name}-data"
        assert cluster.kubectl("-n", ns, "get", "secret", f"{name}-credentials", check=False).returncode != 0
    finally:
        cluster.kubectl("-n", ns, "delete", "resourcequota", "no-more-secrets", check=False)
    oh.wait_successful(cluster, ns, name, operator)
    assert _secret_value(cluster, ns, f"{name}-credentials") == password

    events = cluster.kubectl("-n", ns, "get", "events", "-o", "json").stdout
    assert f"{name}-credentials" in events and password not in events
    assert password not in json.dumps(cluster.get("-n", ns, "mysqls.otus.homework", name).get("status", {}))
    assert password not in json.dumps(cluster.get("-n", ns, "deployment", name)["spec"])
    assert password not in operator.log()
    runner_dir = Path(operator.env["ANSIBLE_KOPF_WORKDIR"]) / "otus.homework" / "MySQL" / ns / name
    # (the object's periodic run may prune old artifacts meanwhile: what is gone holds nothing)
    artifacts = {p: _read_or_empty(p) for p in runner_dir.rglob("*") if p.is_file()}
    assert any(p.name == "stdout" for p in artifacts), sorted(map(str, artifacts))[:20]
    # A run in progress (the object's next reconcile) holds its input in env/extravars,
    # private to the operator's user and removed when the run ends: oh.leaks' rule.
    live_inputs = {p for p in artifacts if p.name == "extravars" and p.parent.name == "env"}
    private = [str(p) for p in live_inputs if _mode_or_zero(p) & 0o077]
    assert private == [], private
    leaked = [str(p) for p, data in artifacts.items() if p not in live_inputs
              and (password.encode() in data or base64.b64encode(password.encode()) in data)]
    assert leaked == [], leaked


@pytest.mark.usefixtures("explain")
def test_deleting_a_server_that_is_not_ready_waits_until_skipping_the_backup_is_allowed(
        cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:
    """No backup can be taken from a server that is not ready: the deletion fails loudly
    (Failure condition, Warning event, finalizer kept) until the user allows deleting
    without a backup with the skip annotation; then the object goes, with no backup Job."""
    ns, name = op_namespace, "notready"
    # The cluster's pause image runs (or, on another cluster, fails to pull): never ready,
    # and the run that is to set the new server's password fails.
    cluster.apply(oh.mysql_object(name, ns, image="localhost/pause:local"))

    def no_password() -> bool:
        cond = oh.condition(cluster.get("-n", ns, "mysqls.otus.homework", name), "Failure")
        return bool(cond and cond["status"] == "True" and "did not get its password" in cond["message"])
    cluster.wait_for(no_password, timeout=360, what="the create to fail at setting the password", interval=2)
    assert oh.ready_condition(cluster, ns, name).get("status") != "True"
    cluster.kubectl("-n", ns, "delete", "mysqls.otus.homework", name, "--wait=false")

    def refused() -> bool:
        cond = oh.condition(cluster.get("-n", ns, "mysqls.otus.homework", name), "Failure")
        return bool(cond and cond["status"] == "True" and "has no ready pod" in cond["message"])
    cluster.wait_for(refused, timeout=180, what="the deletion to be refused", interval=2)
    obj = cluster.get("-n", ns, "mysqls.otus.homework", name)
    assert obj["metadata"].get("deletionTimestamp") and obj["metadata"].get("finalizers"), obj["metadata"]
    warnings = oh.wait_warning(cluster, ns, name, lambda m: "backup before deletion is not possible" in m)
    assert any("backup before deletion is not possible" in m for m in warnings), warnings

    cluster.kubectl("-n", ns, "annotate", "mysqls.otus.homework", name,
                    "otus.homework/skip-backup-if-unavailable=true")
    cluster.wait_for(lambda: cluster.kubectl("-n", ns, "get", "mysqls.otus.homework", name,
                                             check=False).returncode != 0,
                     timeout=300, what="the object to be deleted", interval=2)
    assert cluster.kubectl("-n", ns, "get", "job", f"{name}-backup", check=False).returncode != 0


@pytest.mark.usefixtures("explain")
def test_image_change_rolls_the_deployment_and_storage_growth_is_reported(
        cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:
    """spec.image reaches the Deployment's pod template; spec.storage_size growth on a
    hostPath volume (no StorageClass, so no expansion) leaves the claim as it was and says
    why in status.storage."""

    def one(server: oh.Server) -> None:
        ns, name = op_namespace, server.name("changes")
        cluster.apply(oh.mysql_object(name, ns, image=server.image))
        created = oh.wait_successful(cluster, ns, name, operator)
        assert created["status"]["storage"]["current"] == "1Gi", created["status"]
        new_image = "localhost/pause:local"  # any other image; it need not serve MySQL here
        cluster.kubectl("-n", ns, "patch", "mysqls.otus.homework", name, "--type=merge", "-p",
                        json.dumps({"spec": {"image": new_image, "storage_size": "2Gi"}}))
        changed = oh.wait_successful(cluster, ns, name, operator)
        assert changed["metadata"]["generation"] > created["metadata"]["generation"]

        deployment = cluster.get("-n", ns, "deployment", name)
        assert [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]] == [new_image]
        storage = changed["status"]["storage"]
        assert storage["requested"] == "2Gi" and storage["current"] == "1Gi", storage
        assert str(storage["resizable"]).lower() == "false", storage
        assert "hostPath" in storage["reason"] and "cannot be expanded" in storage["reason"], storage
        pvc = cluster.get("-n", ns, "pvc", f"{name}-data")
        assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi", pvc["spec"]

        # The new image never gets ready, so no backup can be taken: allow deleting without one.
        cluster.kubectl("-n", ns, "annotate", "mysqls.otus.homework", name,
                        "otus.homework/skip-backup-if-unavailable=true")
        cluster.kubectl("-n", ns, "delete", "mysqls.otus.homework", name, "--timeout=300s", timeout=330)

    oh.for_each_server(one)


@pytest.mark.usefixtures("explain")
def test_a_server_that_rejects_the_credentials_is_reported_not_ready(
        cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:
    """The root password changed inside the server behind the operator's back: the readiness
    probe's login fails, the pod leaves the Service, and the object says Ready=False with
    the reason CredentialsRejected and posts a Warning Event; the password put back, it is
    Ready again. No restart and no period: the Deployment's status change runs the role
    (watchDependentStatus). (Edits to <name>-credentials itself are undone by the next
    reconcile.)"""
    server = oh.Server(*sorted(kube.SERVER_IMAGES.items())[-1])
    ns, name = op_namespace, server.name("rejects")
    cluster.apply(oh.mysql_object(name, ns, image=server.image))
    created = oh.wait_successful(cluster, ns, name, operator)
    assert (oh.condition(created, "Ready") or {}).get("status") == "True", created["status"]
    pod = oh.seed_pod(cluster, ns, name)
    oh.seed_exec(cluster, ns, pod, "ALTER USER 'root'@'%' IDENTIFIED BY 'behind-the-back';"
                                " ALTER USER 'root'@'localhost' IDENTIFIED BY 'behind-the-back';")
    cluster.wait_for(lambda: not cluster.get("-n", ns, "deployment", name)["status"].get("readyReplicas"),
                     timeout=120, what="the server's pod to become not ready")

    cluster.wait_for(lambda: oh.ready_condition(cluster, ns, name).get("reason") == "CredentialsRejected",
                     timeout=120, what="the Deployment's status change to report the rejection", interval=2)
    ready = oh.ready_condition(cluster, ns, name)
    assert ready.get("status") == "False" and ready.get("reason") == "CredentialsRejected", ready
    assert "rejects a login as root to otus-database" in ready["message"], ready
    assert "Access denied" in ready["message"], ready
    warnings = [e["message"] for e in oh.warnings_about(cluster, ns, name) if e["reason"] == "CredentialsRejected"]
    assert len(warnings) == 1 and f"{name}-credentials" in warnings[0], warnings
    printed = cluster.kubectl("-n", ns, "get", "ms", name, "-o", "wide").stdout
    assert "CredentialsRejected" in printed, printed

    oh.seed_exec(cluster, ns, pod, "ALTER USER 'root'@'%' IDENTIFIED BY 'otuspassword';"
                                " ALTER USER 'root'@'localhost' IDENTIFIED BY 'otuspassword';",
              password="behind-the-back")
    oh.wait_ready(cluster, ns, name)
    cluster.wait_for(lambda: oh.ready_condition(cluster, ns, name).get("reason") == "LoginAccepted",
                     timeout=120, what="the Deployment's status change to report the server ready", interval=2)
    warnings = [e["message"] for e in oh.warnings_about(cluster, ns, name) if e["reason"] == "CredentialsRejected"]
    assert len(warnings) == 1, warnings


@pytest.mark.usefixtures("explain")
def test_an_object_of_the_previous_release_keeps_reconciling(
        cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:
    """An object whose Deployment and Secret the previous release made (pods without the
    app=<name> label, the password in MYSQL_ROOT_PASSWORD, a ping readiness probe, no
    bootstrap password) is taken over: same selector, the pods get the label and the
    login probe, the server keeps its password and its rows."""
    ns, name = op_namespace, "previous"
    cluster.apply(oh.mysql_object(name, ns))
    oh.wait_successful(cluster, ns, name, operator)
    oh.wait_ready(cluster, ns, name)
    oh.seed_exec(cluster, ns, oh.seed_pod(cluster, ns, name),
              "CREATE TABLE kept (id INT PRIMARY KEY); INSERT INTO kept VALUES (7);")

    # What the previous release applied.
    operator.stop()
    deployment = cluster.get("-n", ns, "deployment", name)
    selector = deployment["spec"]["selector"]
    template = deployment["spec"]["template"]
    del template["metadata"]["labels"]["app"]
    template["metadata"].pop("annotations", None)
    container = template["spec"]["containers"][0]
    container["env"] = [{**e, "valueFrom": {"secretKeyRef": {**e["valueFrom"]["secretKeyRef"], "key": "password"}}}
                        if e["name"] in ("MYSQL_ROOT_PASSWORD", "MYSQL_PASSWORD") else e
                        for e in container["env"] if not e["name"].startswith("MYSQL_OPERATOR_")]
    container["readinessProbe"]["exec"]["command"] = ["mysqladmin", "ping", "-h", "127.0.0.1", "-P", "3306"]
    cluster.kubectl("replace", "-f", "-", stdin=json.dumps(deployment))
    cluster.kubectl("-n", ns, "patch", "secret", f"{name}-credentials", "--type=json", "-p", json.dumps([
        {"op": "remove", "path": "/data/bootstrap-password"},
        {"op": "remove", "path": "/metadata/annotations/otus.homework~1server-password"}]))
    oh.wait_ready(cluster, ns, name)
    assert cluster.kubectl("-n", ns, "get", "pods", "-l", f"app={name}", "-o", "name").stdout.strip() == ""

    run = restart_and_wait_for_run(cluster, operator, ns, name)  # the operator was stopped: this starts it
    assert run.status == "successful", run
    assert oh.ready_condition(cluster, ns, name).get("status") == "True"
    deployment = cluster.get("-n", ns, "deployment", name)
    assert deployment["spec"]["selector"] == selector
    assert deployment["spec"]["template"]["metadata"]["labels"]["app"] == name
    assert "bootstrap-password" in cluster.get("-n", ns, "secret", f"{name}-credentials")["data"]
    printed = oh.seed_exec(cluster, ns, oh.seed_pod(cluster, ns, name), "SELECT id FROM kept;")
    assert printed.split() == ["id", "7"], printed


def test_no_secret_appears_outside_its_secrets(cluster: harness.Cluster, op_namespace: str,
                                              operator: harness.Operator) -> None:
    """Last in the module, after the rotations, literal passwords and failures above: every
    Secret value still in the namespace (passwords, bootstrap passwords, referenced Secrets)
    appears nowhere but in its Secret: not in the operator's log, its runner artifacts, the
    Events, the objects' status or any pod, Deployment or Job spec (plain or base64)."""
    assert len(oh.secret_values(cluster, op_namespace)) > 0, "nothing to look for"
    assert oh.leaks(cluster, op_namespace, operator) == []

