"""mysql_common's filter_plugins/mysql_readiness.py: when a server's Deployment is ready, and
the Ready condition the mysql role reports when it is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import sources

SOURCE = Path(__file__).resolve().parents[2] / "roles/mysql_common/filter_plugins/mysql_readiness.py"

readiness = sources.load(SOURCE, "mysql_readiness")


def _deployment(generation: int = 2, **status: int) -> dict[str, Any]:
    return {"metadata": {"generation": generation}, "spec": {"replicas": 1}, "status": status}


READY = _deployment(observedGeneration=2, replicas=1, updatedReplicas=1, readyReplicas=1)
NOT_READY = _deployment(observedGeneration=2, replicas=1, updatedReplicas=1)
LOGIN = "a login as root to app with the password of Secret db-credentials"


def test_a_deployment_is_ready_when_its_rollout_is_complete_and_its_pod_ready() -> None:
    ready = readiness.deployment_ready
    assert ready(READY)
    assert not ready({})
    assert not ready(NOT_READY)
    # the controller has not seen the new template yet: the old pod's readiness says nothing
    assert not ready(_deployment(observedGeneration=1, replicas=1, updatedReplicas=1, readyReplicas=1))
    # the old pod still runs beside (or instead of) the new one
    assert not ready(_deployment(observedGeneration=2, replicas=1, updatedReplicas=0, readyReplicas=1))
    assert not ready(_deployment(observedGeneration=2, replicas=2, updatedReplicas=1, readyReplicas=1))
    scaled_down = {"metadata": {"generation": 1}, "spec": {"replicas": 0}, "status": {"observedGeneration": 1}}
    assert not ready(scaled_down)


def pod(state: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "db-1"},
            "status": {"containerStatuses": [{"state": state if state is not None else {"running": {}}}]}}


def event(message: str) -> dict[str, Any]:
    return {"reason": "Unhealthy", "message": f"Readiness probe failed: {message}"}


def condition(deployment: dict[str, Any], pod: dict[str, Any] | None = None,
              *said: str) -> tuple[Any, str, str]:
    result = readiness.ready_condition(deployment, pod=pod or {}, probe_events=[event(s) for s in said],
                                       database="app", secret="db-credentials", deployment_name="db")
    assert result["type"] == "Ready"
    return result["status"], result["reason"], result["message"]


def test_a_ready_server_accepts_the_login() -> None:
    # a boolean: what ansible-core 2.18 makes of a templated 'True'
    assert condition(READY) == (True, "LoginAccepted", f"the server accepts {LOGIN}")


def test_the_probe_saying_credentials_rejected_of_a_running_server_is_named() -> None:
    assert condition(NOT_READY, pod(), "starting", "credentials rejected: ERROR 1045 (28000)\n") == (
        False, "CredentialsRejected",
        f"the server runs but rejects {LOGIN} (pod db-1): ERROR 1045 (28000)")
    # the last event counts
    assert condition(NOT_READY, pod(), "credentials rejected: ERROR 1045", "starting")[1] == "ServerStarting"


@pytest.mark.parametrize(("deployment", "the_pod", "reason", "message"), [
    ({}, None, "NoDeployment", "Deployment db does not exist"),
    (NOT_READY, None, "NoPod", "Deployment db has no pod yet"),
    (NOT_READY, pod({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}}),
     "CrashLoopBackOff", "pod db-1: back-off 5m0s"),
    (NOT_READY, pod({"waiting": {"reason": "ContainerCreating"}}), "ContainerCreating",
     "pod db-1: ContainerCreating"),
    (NOT_READY, pod(), "ServerStarting", "pod db-1 is not ready yet"),
    (NOT_READY, {"metadata": {"name": "db-1"}}, "ServerStarting", "pod db-1 is not ready yet"),
    (NOT_READY, {"metadata": {"name": "db-1"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}]}},
     "Unschedulable", "pod db-1 is not scheduled: 0/1 nodes are available: 1 node(s) didn't match Pod's"
                      " node affinity/selector."),
])
def test_a_server_that_is_not_ready_says_why(deployment: dict[str, Any], the_pod: dict[str, Any] | None,
                                             reason: str, message: str) -> None:
    assert condition(deployment, the_pod) == (False, reason, message)


def test_a_starting_server_quotes_the_probe() -> None:
    assert condition(NOT_READY, pod(), "mysqld is not up  ")[2] == "pod db-1 is not ready yet: mysqld is not up"
    # a waiting container is named even when the probe said credentials rejected
    waiting = pod({"waiting": {"reason": "CrashLoopBackOff", "message": "m"}})
    assert condition(NOT_READY, waiting, "credentials rejected: x")[1:] == ("CrashLoopBackOff", "pod db-1: m")
