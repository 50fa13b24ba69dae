"""tests/api_warnings.py: which lines of kubectl's stderr and of an operator's log are recorded
as warnings, the record a worker hands to the controller, and the session that fails on one
(a pytest of its own, with and without xdist workers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import api_warnings

REPO = Path(__file__).resolve().parents[2]

KUBECTL_STDERR = """\
Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice
Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "mysql" must set securityContext.allowPrivilegeEscalation=false)
Warning: resource configmaps/seen is missing the kubectl.kubernetes.io/last-applied-configuration annotation which is required by kubectl apply. The missing annotation will be patched automatically.
Error from server (NotFound): configmaps "absent" not found
WARNING: version difference between client (1.31) and server (1.34) exceeds the supported minor version skew of +/-1
error: unable to recognize "STDIN": the word Warning: inside a line is not one
"""

# An operator's log: what ansible_kopf.kube.proxy writes for the API server's warnings to a run
# (kopf's FULL format), among lines that say "deprecated" or "[WARNING]" about other things.
PROXY = "[2026-11-26 15:00:02,000] ansible_kopf.kube.proxy   [WARNING ] [otus.homework/v1/MySQL ns/db]"
OPERATOR_LOG = f"""\
[2026-11-26 15:00:00,000] kopf._core.reactor.r [DEBUG   ] Starting Kopf 1.45.2.
ansible-kopf: --leader-elect-resource-lock is ignored: the lock is always a Lease (as in the SDK, which deprecated the flag)
[2026-11-26 15:00:00,100] ansible_kopf.sdk.watches [WARNING ] WORKER_MYSQL_OTUS_HOMEWORK is deprecated (the SDK's name); use MAX_CONCURRENT_RECONCILES_MYSQL_OTUS_HOMEWORK
/usr/lib/python3.11/site-packages/dateutil/tz/tz.py:37: DeprecationWarning: datetime.datetime.utcfromtimestamp() is deprecated
[2026-11-26 15:00:01,000] ansible_kopf.kube.proxy   [INFO    ] API proxy for the runs listening on 127.0.0.1:41234
{PROXY} API server warning on POST /apis/batch/v1beta1/namespaces/ns/cronjobs: batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in v1.25+; use batch/v1 CronJob
{PROXY} API server warning on PATCH /apis/apps/v1/namespaces/ns/deployments/db: unknown field "spec.template.spec.foo"
{PROXY} API server warning on POST /apis/apps/v1/namespaces/ns/deployments: duplicate field "replicas"
{PROXY} API server warning on POST /api/v1/namespaces/ns/pods: spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; use "kubernetes.io/os" instead
{PROXY} API server warning on POST /api/v1/namespaces/ns/pods: metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: non-functional in v1.27+; use the "seccompProfile" field instead
{PROXY} API server warning on POST /apis/apps/v1/namespaces/ns/deployments: would violate PodSecurity "restricted:latest": runAsNonRoot != true
[2026-11-26 15:00:03,000] ansible_kopf.ansible [INFO    ] [otus.homework/v1/MySQL ns/db] [WARNING]: batch/v1beta1 CronJob is deprecated in v1.21+,
unavailable in v1.25+; use batch/v1 CronJob
ok: [localhost]
[2026-11-26 15:00:03,100] ansible_kopf.ansible [INFO    ] [otus.homework/v1/MySQL ns/db] task 'Replace the deprecated CronJob': changed
[2026-11-26 15:00:03,200] ansible_kopf.ansible [WARNING ] [otus.homework/v1/MySQL ns/db] task 'Apply' failed: unknown field "spec.foo" in io.k8s.api.apps.v1.DeploymentSpec
"""


@pytest.fixture(autouse=True)
def empty_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record of the test's own (this session's record must not get its samples)."""
    monkeypatch.setattr(api_warnings, "RECORD", {})


def test_the_api_servers_warnings_kubectl_prints_are_recorded_and_nothing_else() -> None:
    assert api_warnings.kubectl_warnings(KUBECTL_STDERR) == [
        "Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice",
        'Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
        '(container "mysql" must set securityContext.allowPrivilegeEscalation=false)',
    ]
    assert api_warnings.kubectl_warnings("") == []


def test_only_the_proxys_deprecation_and_field_warnings_are_recorded_from_an_operator_log() -> None:
    assert api_warnings.operator_warnings(OPERATOR_LOG) == [
        ("POST /apis/batch/v1beta1/namespaces/ns/cronjobs",
         "batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in v1.25+; use batch/v1 CronJob"),
        ("PATCH /apis/apps/v1/namespaces/ns/deployments/db", 'unknown field "spec.template.spec.foo"'),
        ("POST /apis/apps/v1/namespaces/ns/deployments", 'duplicate field "replicas"'),
        ("POST /api/v1/namespaces/ns/pods",
         'spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; use "kubernetes.io/os" instead'),
        ("POST /api/v1/namespaces/ns/pods",
         'metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: non-functional in v1.27+; '
         'use the "seccompProfile" field instead'),
        ("POST /apis/apps/v1/namespaces/ns/deployments", 'would violate PodSecurity "restricted:latest": runAsNonRoot != true'),
    ]


def test_a_warning_is_counted_where_it_was_first_seen_and_a_workers_record_adds_up() -> None:
    api_warnings.from_kubectl(["-n", "t-1", "get", "endpoints"], KUBECTL_STDERR)
    api_warnings.from_kubectl(["-n", "t-2", "get", "endpoints", "-o", "jsonpath={.items}"], KUBECTL_STDERR)
    api_warnings.from_operator_log(OPERATOR_LOG, "/tmp/op/operator.log")
    worker = api_warnings.export()
    assert len(worker) == 3 + 5
    api_warnings.merge(worker)  # as the controller adds a worker's
    report = api_warnings.report()
    assert ("kubectl: Warning: v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice "
            "(4x, first: kubectl -n t-1 get endpoints)") in report
    assert ('operator: unknown field "spec.template.spec.foo" '
            "(2x, first: /tmp/op/operator.log (PATCH /apis/apps/v1/namespaces/ns/deployments/db))") in report


PROBE = """\
from tests import api_warnings


def test_one() -> None:
    api_warnings.from_kubectl(["get", "endpoints"], {stderr!r})


def test_two() -> None:
    pass
"""


@pytest.mark.processes
@pytest.mark.parametrize(("workers", "stderr"), [
    ([], ""),
    ([], "Warning: v1 Endpoints is deprecated in v1.33+\n"),
    (["-n", "2"], "Warning: v1 Endpoints is deprecated in v1.33+\n"),  # a worker's, handed over
], ids=["quiet", "warned", "warned-in-a-worker"])
def test_a_warning_fails_a_session_whose_tests_all_passed(tmp_path: Path, workers: list[str],
                                                          stderr: str) -> None:
    (tmp_path / "test_probe.py").write_text(PROBE.format(stderr=stderr))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "operator")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
                           "-q", *workers, "test_probe.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "2 passed" in done.stdout, done.stdout + done.stderr
    if stderr:
        assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
        assert "1 warnings of the API server or kubectl: the session fails" in done.stdout
        assert ("kubectl: Warning: v1 Endpoints is deprecated in v1.33+ (1x, first: kubectl get endpoints)"
                in done.stdout)
    else:
        assert done.returncode == pytest.ExitCode.OK, done.stdout + done.stderr
        assert "the session fails" not in done.stdout
