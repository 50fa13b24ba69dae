"""The API server's fault as a standing test, on one object per server image: the API
server frozen (SIGSTOP) for 30 s during a delete with its backup, and during a re-create
with its restore. The objects go only with a complete backup, and the restore brings every
row back. `make test` runs this module alone (hack/test.sh): a frozen API server stops every
test beside it. The shared parts are tests/integration/faults.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import harness
from tests.integration import faults
from tests.integration import operator_harness as oh

PREFIX = "faultapi"


@pytest.fixture(scope="module")
def fault_operator(cluster: harness.Cluster,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, harness.Operator]]:
    with faults.module_operator(cluster, PREFIX, tmp_path_factory.mktemp("faultapi-operator")) as running:
        yield running


def test_every_object_keeps_its_rows_through_api_server_freezes(
        cluster: harness.Cluster, fault_operator: tuple[str, harness.Operator]) -> None:
    faults.local_cluster_only(cluster)
    ns, operator = fault_operator
    scenario = faults.Scenario(cluster, ns, operator)
    faults.run_stages([scenario.create_and_write, scenario.delete_freezing, scenario.recreate_freezing])
    assert operator.alive(), operator.log()[-4000:]
    assert oh.leaks(cluster, ns, operator) == []
