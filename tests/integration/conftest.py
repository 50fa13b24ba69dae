"""The operator tests' shared fixtures: per module, a namespace of its own, an operator process
watching it, and `explain`, which prints the namespace's objects, events and the operator's log
when a test fails. A module names its namespaces with NAMESPACE_PREFIX (default "op")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import harness
from tests.integration import operator_harness as oh


@pytest.fixture(scope="module")
def op_namespace(request: pytest.FixtureRequest, cluster: harness.Cluster) -> Iterator[str]:
    with oh.module_namespace(cluster, getattr(request.module, "NAMESPACE_PREFIX", "op")) as name:
        yield name


@pytest.fixture(scope="module")
def operator(cluster: harness.Cluster, op_namespace: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Operator]:
    with oh.operator_in(cluster, op_namespace, tmp_path_factory.mktemp("operator")) as running:
        yield running


@pytest.fixture
def explain(request: pytest.FixtureRequest, cluster: harness.Cluster, op_namespace: str,
            operator: harness.Operator) -> Iterator[None]:
    """On failure, print the namespace's objects, events and the operator log."""
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(oh.diagnostics(cluster, op_namespace, operator))
