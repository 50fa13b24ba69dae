"""The operator's own faults as a standing test: one object per server image goes through
create, password rotation, image change, a delete (with its backup) and a re-creation (with
its restore), and a fault strikes every stage:
- the operator SIGKILLed at a random moment of the create, the rotation, the image change,
  while the delete's backup Jobs run and during the re-create, and started again 2 s later;
- a second operator running at once on the same objects (leader election bypassed) through
  the image change, the delete and the re-create.
After each stage every object converges, has exactly one of each child, no Job is left
running and no temporary Secret or partial backup is left behind, and no row is lost: the
rows plus one marker row per stage are counted, and a backup is only ever recorded when it
is complete. The server's faults are test_faults_servers.py's, the API server's
test_faults_freeze.py's (alone: a frozen API server stops every test beside it); the
shared parts are tests/integration/faults.py.

What leader election prevents, and what races without it: with one leader, runs of one
object never overlap. Two operators run the same role on the same object at once; what the
roles make safe: every write is an idempotent apply of a fixed name, the password rotation
is keyed on a digest, a restore is recorded once, a new instance's bootstrap password is
created once (a server-side apply that conflicts for the second run: were both runs to
write one, the second write would restart a server half-way through its initialisation);
what still races: the deletion's backup Job (the second operator replaces the first one's
Job by its own, so the record names the file of the Job that completed, not the file a run
chose), duplicated Events, and status written twice (last writer wins, both write the same).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import harness
from tests.integration import faults
from tests.integration import operator_harness as oh

PREFIX = "fault"


@pytest.fixture(scope="module")
def fault_operator(cluster: harness.Cluster,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, harness.Operator]]:
    with faults.module_operator(cluster, PREFIX, tmp_path_factory.mktemp("fault-operator")) as running:
        yield running


@pytest.fixture(scope="module")
def second_operator(cluster: harness.Cluster, fault_operator: tuple[str, harness.Operator],
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Operator]:
    """Another operator on the same namespace, not started yet (the test starts and stops it)."""
    other = oh.start_operator(cluster, fault_operator[0], tmp_path_factory.mktemp("second-operator"), start=False)
    try:
        yield other
    finally:
        other.stop()


def test_every_object_converges_and_keeps_its_rows_through_operator_kills_and_a_second_operator(
        cluster: harness.Cluster, fault_operator: tuple[str, harness.Operator],
        second_operator: harness.Operator) -> None:
    faults.local_cluster_only(cluster)
    ns, operator = fault_operator
    scenario = faults.Scenario(cluster, ns, operator, second_operator)
    faults.run_stages([scenario.create_killing_the_operator, scenario.rotate_killing_the_operator,
                       scenario.change_image_with_two_operators, scenario.delete_with_two_operators_killing,
                       scenario.recreate_with_two_operators_killing])
    assert operator.alive(), operator.log()[-4000:]
    assert oh.leaks(cluster, ns, operator) == []
