"""Bad input as a standing test: a corpus of MySQL objects with wrong
types, empty, huge and unicode strings, quotes and shell/Jinja/SQL metacharacters in every
string field, bad quantities and identifiers, missing or conflicting password sources,
references to a Secret or key that does not exist, and names at the length limits.

Each object is either refused by the CRD schema with a message naming its field, or
accepted; an accepted bad one gets a Failure condition and a Warning Event naming the field,
an accepted good one (the names at the limits, metacharacters where the schema allows them)
is reconciled. Nothing in any of them is executed (the metacharacters would create marker
files on this host, where the operator and its Ansible runs are), and the operator keeps
reconciling a good object created after the corpus.

The accepted good objects run a real server (kube.MYSQL_IMAGE): the operator calls them
Successful only once the server has taken the password. The refused ones and those the
operator refuses use the local pause image: no server is ever started for them.

On an API server that evaluates the CRDs' CEL validation rules (`x-kubernetes-validations`;
these tests take 1.29 and later, where they are GA) the rules refuse, with their message:
what the role would refuse only once the object is in (a database name too long once its
'_' are escaped), a change of a field fixed after creation (MySQL spec.storage_class, the
spec of a MySQLBackup or MySQLRestore), and a MySQLBackup that names job, image or database
without file. Updates that leave those fields alone (the operator's labels and status) pass.
On an older server those tests are skipped and the role refuses what it always did."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import figures, harness, kube
from tests.integration import operator_harness as oh

NAMESPACE_PREFIX = "bad"  # its namespace (tests/integration/conftest.py): bad-<random>
MARKER_DIR = Path("/tmp")
MARKER = f"badinput-{uuid.uuid4().hex[:8]}"  # a file of this prefix would mean something ran


def traps(tag: str) -> str:
    """Shell, Jinja and SQL that would leave a marker file (or do worse) if executed."""
    mark = MARKER_DIR / f"{MARKER}-{tag}"
    return (f"$(touch {mark}-s)`touch {mark}-t`{{{{ lookup('pipe','touch {mark}-j') }}}}"
            f"{{% raw %}}'; DROP TABLE x; -- \"")


@dataclass(frozen=True)
class Case:
    """One object of the corpus: how it differs from a good object, and what must happen."""

    id: str
    spec: dict[str, Any] = field(default_factory=dict)  # merged over a good spec; None deletes
    name: str | None = None  # metadata.name (default: derived from id)
    field: str = ""  # the field the refusal or the Failure must name
    accepted: bool = False  # the schema lets it in
    fails: bool = False  # accepted, then a Failure condition and Warning Event naming `field`
    # a CEL rule of the CRD refuses it with this message where the API server evaluates them
    # (cel_validation); an accepted case is then refused at creation, not by the operator
    cel_message: str = ""

    def body(self, namespace: str) -> dict[str, Any]:
        spec: dict[str, Any] = {"image": kube.LOCAL_PAUSE_IMAGE, "database": "otus", "password": "good-pw",
                                "storage_size": "1Gi"}
        for key, value in self.spec.items():
            if value is None:
                spec.pop(key, None)
            else:
                spec[key] = value
        return {"apiVersion": "otus.homework/v1", "kind": "MySQL",
                "metadata": {"name": self.name or f"bad-{self.id}", "namespace": namespace}, "spec": spec}


REF = "passwordSecretRef"
# the messages of the CRDs' CEL rules (deploy/crd.yml), as far as a test needs them
ONE_PASSWORD = "exactly one of spec.password and spec.passwordSecretRef must be set"
ESCAPED_DATABASE = "spec.database must be at most 64 characters with each '_' counted twice"
RESERVED_DATABASE = "spec.database cannot be mysql, sys, information_schema, performance_schema or mysql_operator"
CONFIG_NAMES = "spec.config keys must be server option names"
CONFIG_MANAGED = "spec.config cannot set the options the operator manages or that run code or SQL"
FIXED_CLASS = "spec.storage_class cannot be set, changed or removed after creation"
FIXED_BACKUP = "spec (instance, file, job, image, database, verify) is fixed once set"
FIXED_RESTORE = "spec (instance, backup, pointInTime) is fixed once set"
ONE_SOURCE = "exactly one of spec.backup and spec.pointInTime must be set"
FILE_FIELDS = "spec.job, spec.image and spec.database describe spec.file and are set only with it"
# a bucket's settings the schema admits (the cases that change one of them)
S3_GOOD = {"endpoint": "http://s3.example:9000", "bucket": "b", "credentialsSecret": "s3-creds"}
# the first API server version whose CEL validation rules these tests take (GA since 1.29)
CEL_VALIDATION = (1, 29)
REFUSED = [
    # metadata.name: the Deployment, Service and volumes are named after it
    Case("name-long", name="n" * 41, field="metadata.name"),
    Case("name-upper", name="Bad-Name", field="metadata.name"),
    Case("name-unicode", name="имя", field="metadata.name"),
    Case("name-dash", name="-x", field="metadata.name"),
    # image
    Case("image-empty", {"image": ""}, field="spec.image"),
    Case("image-huge", {"image": "i" * 513}, field="spec.image"),
    Case("image-space", {"image": "mysql:8.4 && touch /tmp/x"}, field="spec.image"),
    Case("image-int", {"image": 84}, field="spec.image"),
    Case("image-list", {"image": ["mysql"]}, field="spec.image"),
    Case("image-missing", {"image": None}, field="spec.image"),
    Case("image-dash", {"image": "-x"}, field="spec.image"),
    # database
    Case("db-empty", {"database": ""}, field="spec.database"),
    Case("db-huge", {"database": "d" * 65}, field="spec.database"),
    Case("db-sql", {"database": "x`; DROP DATABASE mysql; --"}, field="spec.database"),
    Case("db-quote", {"database": "o'tus"}, field="spec.database"),
    Case("db-dquote", {"database": 'o"tus'}, field="spec.database"),
    Case("db-jinja", {"database": "{{7*7}}"}, field="spec.database"),
    Case("db-shell", {"database": "$(touch /tmp/x)"}, field="spec.database"),
    Case("db-traps", {"database": traps("db")}, field="spec.database"),
    Case("db-unicode", {"database": "база"}, field="spec.database"),
    Case("db-int", {"database": 42}, field="spec.database"),
    Case("db-missing", {"database": None}, field="spec.database"),
    # what the Jobs' clients would read as their own options: -h sent the Job's root login to
    # that address, -e ran the statement as root; never a leading '-'
    Case("db-option-host", {"database": "-hevil"}, field="spec.database"),
    Case("db-option-execute", {"database": "-eSHUTDOWN"}, field="spec.database"),
    Case("db-option-init-command", {"database": "--init-command=x"}, field="spec.database"),
    Case("db-dash", {"database": "-"}, field="spec.database"),
    # password sources
    Case("pw-empty", {"password": ""}, field="spec.password"),
    Case("pw-huge", {"password": "p" * 129}, field="spec.password"),
    Case("pw-int", {"password": 1234}, field="spec.password"),
    Case("pw-object", {"password": {"value": "x"}}, field="spec.password"),
    Case("pw-both", {REF: {"name": "s"}}, field="spec", cel_message=ONE_PASSWORD),
    # (refused by the schema's oneOf before a CEL rule is evaluated)
    Case("pw-neither", {"password": None}, field="spec"),
    Case("ref-string", {"password": None, REF: "secret-name"}, field=f"spec.{REF}"),
    Case("ref-no-name", {"password": None, REF: {"key": "password"}}, field=f"spec.{REF}.name"),
    Case("ref-name-empty", {"password": None, REF: {"name": ""}}, field=f"spec.{REF}.name"),
    Case("ref-name-upper", {"password": None, REF: {"name": "Bad_Secret"}}, field=f"spec.{REF}.name"),
    Case("ref-name-huge", {"password": None, REF: {"name": "s" * 254}}, field=f"spec.{REF}.name"),
    Case("ref-name-traps", {"password": None, REF: {"name": traps("ref")}}, field=f"spec.{REF}.name"),
    Case("ref-key-empty", {"password": None, REF: {"name": "s", "key": ""}}, field=f"spec.{REF}.key"),
    Case("ref-key-space", {"password": None, REF: {"name": "s", "key": "a b"}}, field=f"spec.{REF}.key"),
    Case("ref-key-jinja", {"password": None, REF: {"name": "s", "key": "{{x}}"}}, field=f"spec.{REF}.key"),
    # quantities
    Case("size-word", {"storage_size": "lots"}, field="spec.storage_size"),
    Case("size-empty", {"storage_size": ""}, field="spec.storage_size"),
    Case("size-space", {"storage_size": "1 Gi"}, field="spec.storage_size"),
    Case("size-negative", {"storage_size": "-1Gi"}, field="spec.storage_size"),
    Case("size-shell", {"storage_size": "1Gi;rm -rf /"}, field="spec.storage_size"),
    Case("size-int", {"storage_size": 1}, field="spec.storage_size"),
    Case("size-missing", {"storage_size": None}, field="spec.storage_size"),
    Case("class-empty", {"storage_class": ""}, field="spec.storage_class"),
    Case("class-upper", {"storage_class": "Fast_SSD"}, field="spec.storage_class"),
    Case("class-traps", {"storage_class": traps("class")}, field="spec.storage_class"),
    Case("keep-zero", {"backup": {"schedule": "@daily", "keep": 0}}, field="spec.backup.keep"),
    Case("keep-word", {"backup": {"keep": "all"}}, field="spec.backup.keep"),
    Case("schedule-words", {"backup": {"schedule": "every day"}}, field="spec.backup.schedule"),
    Case("schedule-traps", {"backup": {"schedule": traps("cron")}}, field="spec.backup.schedule"),
    Case("schedule-dash", {"backup": {"schedule": "-1 * * * *"}}, field="spec.backup.schedule"),
    # the bucket's settings, which the backup pods get: no leading '-' (nor '.' in the prefix)
    Case("s3-prefix-dash", {"backup": {"s3": {**S3_GOOD, "prefix": "team/-x"}}}, field="spec.backup.s3.prefix"),
    Case("s3-prefix-dots", {"backup": {"s3": {**S3_GOOD, "prefix": "../other/db"}}}, field="spec.backup.s3.prefix"),
    Case("s3-region-dash", {"backup": {"s3": {**S3_GOOD, "region": "-x"}}}, field="spec.backup.s3.region"),
    Case("s3-endpoint-dash", {"backup": {"s3": {**S3_GOOD, "endpoint": "http://-x:9000"}}},
         field="spec.backup.s3.endpoint"),
    # server options: values of letters, digits and a few separators, never quotes or spaces
    Case("config-traps", {"config": {"sql_mode": traps("config")}}, field="spec.config.sql_mode"),
    Case("config-quote", {"config": {"sql_mode": "ANSI'; DROP TABLE x; --"}}, field="spec.config.sql_mode"),
    Case("config-newline", {"config": {"max_connections": "10\n[mysqld]\ninit-file=/tmp/x"}},
         field="spec.config.max_connections"),
    Case("config-bool", {"config": {"general_log": True}}, field="spec.config.general_log"),
    Case("config-list", {"config": ["max_connections=10"]}, field="spec.config"),
    Case("config-many", {"config": {f"option_{i}": "1" for i in range(65)}}, field="spec.config"),
    Case("restore-from-upper", {"restore_from": "Latest_Backup"}, field="spec.restore_from"),
    Case("restore-from-traps", {"restore_from": traps("from")}, field="spec.restore_from"),
]
ACCEPTED = [
    # names and values at their limits, and metacharacters where the schema allows them
    # one object per server image: a name, a database and a password at their length limits,
    # the password with unicode, quotes, `$(...)`, backquotes, {{ }} and SQL, the database with $
    *(Case(f"limits-{key}", name=f"{key}-".ljust(40, "l"), accepted=True, spec={
        "image": image, "database": ("$otus-db-" + "d" * 64)[:64],
        "password": ("пароль-密码-🔑" + traps("pw")).ljust(128, "p")[:128]})
      for key, image in sorted(kube.SERVER_IMAGES.items())),
    # accepted by the schema, refused by the operator
    Case("db-underscores", {"database": "o_t_u_s" * 9}, field="spec.database", accepted=True, fails=True,
         cel_message=ESCAPED_DATABASE),
    Case("db-operators", {"database": "mysql_operator"}, field="spec.database", accepted=True, fails=True,
         cel_message=RESERVED_DATABASE),
    Case("db-servers", {"database": "mysql"}, field="spec.database", accepted=True, fails=True,
         cel_message=RESERVED_DATABASE),
    Case("ref-missing", {"password": None, REF: {"name": "no-such-secret"}},
         field=f"spec.{REF}", accepted=True, fails=True),
    Case("ref-key-missing", {"password": None, REF: {"name": "has-other-key", "key": "password"}},
         field=f"spec.{REF}", accepted=True, fails=True),
    Case("ref-key-empty-value", {"password": None, REF: {"name": "has-empty-value"}},
         field=f"spec.{REF}", accepted=True, fails=True),
    # the shape of a cron schedule, but a minute 61 (or a day that never comes)
    Case("schedule-out-of-range", {"backup": {"schedule": "61 * * * *"}}, field="spec.backup.schedule",
         accepted=True, fails=True),
    Case("schedule-never", {"backup": {"schedule": "0 0 30 feb *"}}, field="spec.backup.schedule",
         accepted=True, fails=True),
    Case("config-managed", {"config": {"port": 3307}}, field="spec.config", accepted=True, fails=True,
         cel_message=CONFIG_MANAGED),
    Case("config-init-file", {"config": {"loose-init-file": "/tmp/x.sql"}}, field="spec.config",
         accepted=True, fails=True, cel_message=CONFIG_MANAGED),
    Case("config-name", {"config": {"Max Connections": 10}}, field="spec.config",
         accepted=True, fails=True, cel_message=CONFIG_NAMES),
    Case("config-live-kind", {"config": {"max_connections": "many"}}, field="spec.config.max_connections",
         accepted=True, fails=True),
    Case("restore-from-missing", {"restore_from": "no-such-backup"}, field="spec.restore_from",
         accepted=True, fails=True),
    # a time of the right form that does not exist
    Case("restore-from-feb-30", {"restore_from": "2026-02-30T12:00:00Z"}, field="spec.restore_from",
         accepted=True, fails=True),
    # a bucket whose Secrets are missing or lack what the Jobs read
    Case("s3-credentials-missing", {"backup": {"s3": {"endpoint": "http://s3.example:9000", "bucket": "bk-bucket",
                                                      "credentialsSecret": "no-such-secret"}}},
         field="spec.backup.s3.credentialsSecret", accepted=True, fails=True),
    Case("s3-credentials-keys", {"backup": {"s3": {"endpoint": "http://s3.example:9000", "bucket": "bk-bucket",
                                                   "credentialsSecret": "has-other-key"}}},
         field="spec.backup.s3.credentialsSecret", accepted=True, fails=True),
]


def test_the_corpus_is_large_enough() -> None:
    assert len(REFUSED) + len(ACCEPTED) >= 40


def executed() -> list[str]:
    return sorted(str(p) for p in MARKER_DIR.glob(f"{MARKER}*"))


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.id)
def test_the_schema_refuses_naming_the_field(cluster: harness.Cluster, op_namespace: str, case: Case) -> None:
    oh.install_crd(cluster)
    done = cluster.kubectl("create", "--validate=false", "-f", "-", stdin=json.dumps(case.body(op_namespace)),
                           check=False)
    assert done.returncode != 0, f"accepted: {case}"
    assert case.field in done.stderr, done.stderr
    assert executed() == []
    figures.add("bad inputs refused")


def cel_validation(cluster: harness.Cluster) -> bool:
    """Whether the API server evaluates the CRDs' CEL validation rules (as these tests take them)."""
    return cluster.server_version >= CEL_VALIDATION


@pytest.fixture(scope="module")
def cel_namespace(cluster: harness.Cluster) -> Iterator[str]:
    """A namespace no operator watches, on a server with CEL validation (else the test is skipped)."""
    if not cel_validation(cluster):
        pytest.skip(f"API server {cluster.server_version}: CEL validation rules are tested from "
                    f"{CEL_VALIDATION} (older servers drop them; the roles' checks stand in)")
    oh.install_crd(cluster)
    with oh.module_namespace(cluster, "cel") as name:
        yield name


@pytest.mark.parametrize("case", [c for c in REFUSED + ACCEPTED if c.cel_message], ids=lambda c: c.id)
def test_the_cel_rules_refuse_naming_the_field(cluster: harness.Cluster, cel_namespace: str, case: Case) -> None:
    done = cluster.kubectl("create", "--validate=false", "-f", "-", stdin=json.dumps(case.body(cel_namespace)),
                           check=False)
    assert done.returncode != 0, f"accepted: {case}"
    assert case.cel_message in done.stderr and case.field in done.stderr, done.stderr
    figures.add("bad inputs refused")


KINDS = {  # resource: (kind, a good spec)
    "mysqls.otus.homework": ("MySQL", {"image": kube.LOCAL_PAUSE_IMAGE, "database": "otus",
                                       "password": "good-pw", "storage_size": "1Gi"}),
    "mysqlbackups.otus.homework": ("MySQLBackup", {"instance": "db"}),
    "mysqlrestores.otus.homework": ("MySQLRestore", {"instance": "db", "backup": "db-older"}),
}
RECORDED = {"file": "db-20260101T000000Z.sql", "job": "db-bk-1", "image": "mysql:8.4", "database": "otus"}


@dataclass(frozen=True)
class Write:
    """A create (and then, with `patch`, a merge patch) that a CEL rule refuses with
    `message`, or that goes through (no `message`): the rules must not stand in the way of
    what the operator writes (labels, status) nor of a change of another field."""

    id: str
    resource: str
    spec: dict[str, Any] = field(default_factory=dict)  # merged over KINDS' good spec; None deletes
    patch: dict[str, Any] | None = None  # after the create, which must go through
    subresource: str = ""  # the patch's (status)
    message: str = ""  # the refusal's; none: the write goes through

    def body(self, namespace: str) -> dict[str, Any]:
        kind, good = KINDS[self.resource]
        spec = {k: v for k, v in {**good, **self.spec}.items() if v is not None}
        return {"apiVersion": "otus.homework/v1", "kind": kind,
                "metadata": {"name": f"cel-{self.id}", "namespace": namespace}, "spec": spec}


MYSQLS, BACKUPS, RESTORES = KINDS
WRITES = [
    # MySQL: the data volume keeps the class (or the hostPath volume) it was created with
    Write("class-change", MYSQLS, {"storage_class": "fast"}, {"spec": {"storage_class": "slow"}},
          message=FIXED_CLASS),
    Write("class-set", MYSQLS, {}, {"spec": {"storage_class": "fast"}}, message=FIXED_CLASS),
    Write("class-unset", MYSQLS, {"storage_class": "fast"}, {"spec": {"storage_class": None}},
          message=FIXED_CLASS),
    Write("class-kept", MYSQLS, {"storage_class": "fast"},
          {"spec": {"storage_size": "2Gi", "image": "mysql:8.4", "password": "new-pw"}}),
    Write("no-class-kept", MYSQLS, {}, {"spec": {"storage_size": "2Gi"}}),
    Write("class-status", MYSQLS, {"storage_class": "fast"}, {"status": {"message": "written by the operator"}},
          subresource="status"),
    # MySQLBackup: file, job, image and database together, as the operator records a backup
    Write("backup-job-alone", BACKUPS, {"job": "db-bk-1"}, message=FILE_FIELDS),
    Write("backup-image-alone", BACKUPS, {"image": "mysql:8.4"}, message=FILE_FIELDS),
    Write("backup-database-alone", BACKUPS, {"database": "otus"}, message=FILE_FIELDS),
    Write("backup-recorded", BACKUPS, {**RECORDED, "verify": False}),
    Write("backup-file-alone", BACKUPS, {"file": "db-20260101T000000Z.sql"}),
    # ... and its spec fixed once set
    Write("backup-instance", BACKUPS, {}, {"spec": {"instance": "other"}}, message=FIXED_BACKUP),
    Write("backup-verify", BACKUPS, {}, {"spec": {"verify": False}}, message=FIXED_BACKUP),
    Write("backup-file", BACKUPS, RECORDED, {"spec": {"file": "other.sql"}}, message=FIXED_BACKUP),
    Write("backup-label", BACKUPS, RECORDED, {"metadata": {"labels": {"otus.homework/pruning": "true"}}}),
    Write("backup-status", BACKUPS, RECORDED, {"status": {"state": "Complete"}}, subresource="status"),
    # MySQLRestore: one load, of one backup into one instance
    Write("restore-backup", RESTORES, {}, {"spec": {"backup": "db-newer"}}, message=FIXED_RESTORE),
    Write("restore-instance", RESTORES, {}, {"spec": {"instance": "other"}}, message=FIXED_RESTORE),
    Write("restore-status", RESTORES, {}, {"status": {"state": "Complete"}}, subresource="status"),
    # ... of a backup or to a point in time, not both
    Write("restore-both", RESTORES, {"pointInTime": "2026-11-27T16:04:05Z"}, message=ONE_SOURCE),
    Write("restore-neither", RESTORES, {"backup": None}, message=ONE_SOURCE),
    Write("restore-point", RESTORES, {"backup": None, "pointInTime": "2026-11-27T16:04:05+02:00"}),
]


# A backup's record as the operator writes it, with a value its Jobs' clients would read as an
# option of their own: refused by the schema's patterns (on every server), naming the field.
BACKUP_REFUSED = [
    Write("backup-db-host", BACKUPS, {**RECORDED, "database": "-hevil"}, message="spec.database"),
    Write("backup-db-execute", BACKUPS, {**RECORDED, "database": "-eSHUTDOWN"}, message="spec.database"),
    Write("backup-db-init-command", BACKUPS, {**RECORDED, "database": "--init-command=x"}, message="spec.database"),
    Write("backup-image-dash", BACKUPS, {**RECORDED, "image": "-x"}, message="spec.image"),
    Write("backup-file-dash", BACKUPS, {**RECORDED, "file": "-x.sql"}, message="spec.file"),
]


@pytest.mark.parametrize("write", BACKUP_REFUSED, ids=lambda w: w.id)
def test_the_schema_refuses_a_backup_naming_the_field(cluster: harness.Cluster, op_namespace: str,
                                                      write: Write) -> None:
    oh.install_crd(cluster)
    done = cluster.kubectl("create", "--validate=false", "-f", "-", stdin=json.dumps(write.body(op_namespace)),
                           check=False)
    assert done.returncode != 0, f"accepted: {write}"
    assert write.message in done.stderr, done.stderr
    assert executed() == []
    figures.add("bad inputs refused")


@pytest.mark.parametrize("write", WRITES, ids=lambda w: w.id)
def test_the_cel_rules_refuse_a_change_of_what_is_fixed(cluster: harness.Cluster, cel_namespace: str,
                                                        write: Write) -> None:
    body = write.body(cel_namespace)
    name = body["metadata"]["name"]
    done = cluster.kubectl("create", "--validate=false", "-f", "-", stdin=json.dumps(body), check=False)
    if write.patch is None:
        assert (done.returncode == 0) == (not write.message), done.stderr
        assert write.message in done.stderr, done.stderr
        if write.message:
            figures.add("bad inputs refused")
        return
    assert done.returncode == 0, done.stderr
    before = cluster.get("-n", cel_namespace, write.resource, name)
    done = cluster.kubectl("-n", cel_namespace, "patch", write.resource, name, "--type=merge",
                           "-p", json.dumps(write.patch),
                           *([f"--subresource={write.subresource}"] if write.subresource else []), check=False)
    after = cluster.get("-n", cel_namespace, write.resource, name)
    if write.message:
        assert done.returncode != 0 and write.message in done.stderr, done.stderr
        assert after["spec"] == before["spec"], after["spec"]
        figures.add("bad inputs refused")
    else:
        assert done.returncode == 0, done.stderr
        assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"], after


def test_the_operator_refuses_or_reconciles_the_accepted_ones_and_runs_nothing(
        cluster: harness.Cluster, op_namespace: str, operator: harness.Operator) -> None:
    ns = op_namespace
    cluster.kubectl("-n", ns, "create", "secret", "generic", "has-other-key", "--from-literal=other=x")
    cluster.kubectl("-n", ns, "create", "secret", "generic", "has-empty-value", "--from-literal=password=")
    # what a CEL rule refuses at creation is test_the_cel_rules_refuse_naming_the_field's there
    accepted = [case for case in ACCEPTED if not (case.cel_message and cel_validation(cluster))]
    for case in accepted:
        cluster.apply(json.dumps(case.body(ns)))

    def settled(case: Case) -> dict[str, Any] | None:
        obj = cluster.get("-n", ns, "mysqls.otus.homework", case.body(ns)["metadata"]["name"])
        want = "Failure" if case.fails else "Successful"
        cond = oh.condition(obj, want)
        return obj if cond and cond["status"] == "True" else None

    def all_settled() -> bool:
        if not operator.alive():
            raise AssertionError(f"the operator exited:\n{operator.log()[-6000:]}")
        return all(settled(case) for case in accepted)

    cluster.wait_for(all_settled, timeout=900, what="every accepted object to be reconciled or refused",
                     interval=3)
    for case in accepted:
        name = case.body(ns)["metadata"]["name"]
        obj = settled(case)
        assert obj is not None
        if case.fails:
            failure = oh.condition(obj, "Failure")
            assert failure is not None and case.field in failure["message"], (case.id, failure)
            warnings = oh.wait_warning(cluster, ns, name, lambda m, field=case.field: field in m)
            assert any(case.field in m for m in warnings), (case.id, warnings)
            figures.add("bad inputs refused")
        else:
            deployment = cluster.get("-n", ns, "deployment", name)
            assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == case.body(ns)["spec"]["image"]
            figures.add("bad inputs reconciled")
    assert executed() == [], "something in the corpus was executed"

    # The operator is still healthy: a good object created after the corpus converges.
    good = Case("after", {"image": kube.MYSQL_IMAGE}, name="good-after")
    cluster.apply(json.dumps(good.body(ns)))
    oh.wait_successful(cluster, ns, "good-after", operator, timeout=300)
    assert operator.alive()
    assert executed() == []


def test_no_secret_appears_outside_its_secrets(cluster: harness.Cluster, op_namespace: str,
                                              operator: harness.Operator) -> None:
    """For this module's objects: the passwords (and the generated
    bootstrap passwords) are in their Secrets only."""
    found = len(oh.secret_values(cluster, op_namespace))  # a count: the values stay unprinted
    assert found >= 4, f"{found} Secret values: expected the password and bootstrap password of two servers"
    assert oh.leaks(cluster, op_namespace, operator) == []
