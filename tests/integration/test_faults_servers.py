"""The servers' and volumes' faults as a standing test, on one object per server image:
- the server killed (its process SIGKILLed, its pod force-deleted) while the delete's backup
  Job dumps, then the operator killed right after the backup Jobs completed;
- the server killed while the re-create's restore Job loads the backup;
- the backup volume full (a small tmpfs the test fills) when the object is deleted, the
  operator killed right after the delete.
After each stage every object converges (or goes, with a complete backup), has exactly one
of each child, no partial backup is left behind, and no row is lost. The shared parts are
tests/integration/faults.py; the operator's faults are test_faults.py's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import harness
from tests.integration import faults
from tests.integration import operator_harness as oh

PREFIX = "faultsrv"


@pytest.fixture(scope="module")
def fault_operator(cluster: harness.Cluster,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, harness.Operator]]:
    faults.unmount_stale_fillers(PREFIX)
    with faults.module_operator(cluster, PREFIX, tmp_path_factory.mktemp("faultsrv-operator")) as (ns, operator):
        try:
            yield ns, operator
        finally:
            for mount in faults.tmpfs_mounts(oh.HOSTPATH_BASE / "backups" / ns):
                faults.unmount(mount)


def test_every_object_keeps_its_rows_through_server_kills_and_a_full_backup_volume(
        cluster: harness.Cluster, fault_operator: tuple[str, harness.Operator]) -> None:
    faults.local_cluster_only(cluster)
    ns, operator = fault_operator
    scenario = faults.Scenario(cluster, ns, operator)
    faults.run_stages([scenario.create_and_write, scenario.delete_killing_the_server_mid_dump,
                       scenario.recreate_killing_the_server_mid_restore, scenario.delete_with_a_full_backup_volume])
    assert operator.alive(), operator.log()[-4000:]
    assert oh.leaks(cluster, ns, operator) == []
