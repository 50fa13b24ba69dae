"""Shared pytest fixtures: the Kubernetes cluster every integration test talks to.

`cluster` uses the cluster in `$KUBECONFIG` when the user points at one (kind,
minikube, a real cluster); otherwise it brings up the local single-node cluster
(`cluster/cluster.sh up`, a no-op when it already runs) and uses its kubeconfig.
`namespace` gives each test a fresh namespace and deletes it afterwards.

`make test` runs most of the suite in two pytest-xdist workers (hack/test.sh,
`--dist loadfile`): one worker runs a module whole, so its module fixtures, operators and
servers are set up once. The slowest modules are handed out first (:data:`SLOWEST_FIRST`,
with `--no-loadscope-reorder`, which keeps this order instead of xdist's most-tests-first):
a long module that starts last would run on alone at the end. The workers' suite figures
are summed here, and the summary says when each long module ran, in which worker.

An API server warning that kubectl printed or an operator logged (tests/api_warnings.py), in
any worker, fails the session: the summary lists them, and the exit status is 1 even when
every test passed. So does, with CI set, a skipped test: CI runs everything. A KUBECONFIG
that names the local cluster is the local cluster: the tests that need its node run.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import api_warnings, figures, harness
from tests.integration import operator_harness

REPO = Path(__file__).resolve().parent.parent
LOCK = Path(tempfile.gettempdir()) / "mysql-operator-cluster-up.lock"  # one worker brings it up


# The longest modules of make test, longest first (measured on one of two workers): the
# order they are handed out in.
SLOWEST_FIRST = ("tests/integration/test_backups.py", "tests/integration/test_object_storage.py",
                 "tests/integration/test_restores.py",
                 "tests/integration/test_operator.py", "tests/integration/test_faults.py",
                 "tests/integration/test_faults_servers.py",
                 "tests/integration/test_settings.py",
                 "tests/integration/test_molecule.py",
                 "tests/integration/test_bad_input.py", "tests/integration/test_availability.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slowest modules first, the others in their order (a stable sort)."""
    rank = {module: i for i, module in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    """Keep each phase's report on the test item, so fixtures can tell a failed test."""
    report: pytest.TestReport = yield
    setattr(item, "rep_" + report.when, report)
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In an xdist worker: hand this worker's figures and API warnings to the controller. In
    the controller (or a run without workers): fail the session if there was a warning."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["figures"] = dict(figures.FIGURES)
        output["measured"] = list(figures.MEASURED)
        output["api_warnings"] = api_warnings.export()
    elif api_warnings.RECORD and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif SKIPPED and os.environ.get("CI") and session.exitstatus == pytest.ExitCode.OK:
        # CI runs everything: a skipped test there is one that did not run, and fails the run
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_testnodedown(node: Any, error: Any) -> None:
    """In the xdist controller: a worker finished; add its figures and API warnings."""
    figures.FIGURES.update(getattr(node, "workeroutput", {}).get("figures", {}))
    figures.MEASURED.extend(getattr(node, "workeroutput", {}).get("measured", []))
    api_warnings.merge(getattr(node, "workeroutput", {}).get("api_warnings", []))


# module -> [worker, first start, last stop] of its reports (in the xdist controller, all workers')
SPANS: dict[str, list[Any]] = {}


SKIPPED: list[str] = []  # in the controller: the tests that were skipped, and why


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note when each test module ran, and in which worker: where the time budget goes; and
    which tests were skipped."""
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        SKIPPED.append(f"{report.nodeid}: {reason}")
    module = report.nodeid.split("::")[0]
    node = getattr(report, "node", None)
    worker = node.gateway.id if node is not None else "-"
    span = SPANS.setdefault(module, [worker, report.start, report.stop])
    span[1], span[2] = min(span[1], report.start), max(span[2], report.stop)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The API server warnings that fail the session (tests/api_warnings.py); the figures of
    the fault, bad-input and leak-scan tests (tests/figures.py); the modules that took 30 s
    or more, in the order they started, with their worker."""
    warned = api_warnings.report()
    if warned and not hasattr(terminalreporter.config, "workeroutput"):
        terminalreporter.write_sep("=", f"{len(warned)} warnings of the API server or kubectl: "
                                        "the session fails", red=True)
        for line in warned:
            terminalreporter.write_line(f"  {line}")
    if SKIPPED and not hasattr(terminalreporter.config, "workeroutput"):
        ci = " (CI: the run fails)" if os.environ.get("CI") else ""
        terminalreporter.write_sep("=", f"{len(SKIPPED)} skipped tests{ci}", red=bool(ci))
        for line in SKIPPED:
            terminalreporter.write_line(f"  {line}")
    for measured in figures.MEASURED:
        terminalreporter.write_line(measured)
    if figures.line():
        terminalreporter.write_line(figures.line())
    if not SPANS:
        return
    first = min(start for _, start, _ in SPANS.values())
    long = sorted((start, module, worker, stop) for module, (worker, start, stop) in SPANS.items()
                  if stop - start >= 30)
    if long:
        terminalreporter.write_line("modules of 30 s or more (worker, from the first test's start, span):")
    for start, module, worker, stop in long:
        terminalreporter.write_line(f"  {worker:>4} {start - first:7.0f}s {stop - start:6.0f}s  {module}")


def names_the_local_cluster(kubeconfig: str) -> bool:
    """Whether `kubeconfig` reaches the local cluster (its API server's address is the one
    in cluster/cluster.sh's kubeconfig): then the tests that need its node (this host) run."""
    local = subprocess.run([str(REPO / "cluster" / "cluster.sh"), "kubeconfig"], capture_output=True, text=True,
                           check=False).stdout.strip()

    def servers(path: str) -> set[str]:
        try:
            config = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError):
            return set()
        return {str(c.get("cluster", {}).get("server")) for c in config.get("clusters") or []}
    return bool(local) and Path(local).exists() and bool(servers(kubeconfig) & servers(local))


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[harness.Cluster]:
    given = os.environ.get("KUBECONFIG")
    if given and not names_the_local_cluster(given):
        found = harness.Cluster(kubeconfig=given, kubectl_bin="kubectl", local=False)
    else:
        script = REPO / "cluster" / "cluster.sh"
        capture = request.config.pluginmanager.getplugin("capturemanager")
        # one worker brings it up, the other waits (hack/test.sh already did, printing progress)
        with capture.global_and_fixture_disabled(), LOCK.open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            print("\n>> bringing up the local cluster (first run builds Kubernetes: see README)", flush=True)
            subprocess.run([str(script), "up"], check=True)
        kubeconfig = subprocess.run([str(script), "kubeconfig"], check=True, capture_output=True, text=True).stdout.strip()
        kubectl = subprocess.run([str(script), "kubectl-path"], check=True, capture_output=True, text=True).stdout.strip()
        found = harness.Cluster(kubeconfig=kubeconfig, kubectl_bin=kubectl, local=True)
    os.environ["KUBECONFIG"] = found.kubeconfig
    found.wait_ready()
    swept = operator_harness.sweep_dead_owners(found)
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n>> Kubernetes API server {found.server_git_version()} ({found.kubeconfig})", flush=True)
        if swept:
            print(f">> removing {len(swept)} namespaces of killed test runs: {' '.join(swept)}", flush=True)
    yield found
    operator_harness.finish_removals(found)  # the directories of the namespaces tests removed


@pytest.fixture
def namespace(cluster: harness.Cluster) -> Iterator[str]:
    name = cluster.create_namespace(f"t-{uuid.uuid4().hex[:8]}")
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
