"""Filters that tell whether an instance's server is ready, for the mysql role's
tasks/readiness.yml: whether its Deployment's rollout is complete and its pod ready
(`mysql_deployment_ready`), and the Ready condition the role reports
(`mysql_ready_condition`): when the server is not ready, why, as far as its pod and the
readiness probe's events tell.

Python rather than Jinja: the condition is a chain of cases (ready, credentials rejected,
no Deployment, no pod, a waiting container, starting), each with a reason and a message,
and the unit tests (tests/unit/test_mysql_readiness.py) pin what users read.
"""

from __future__ import annotations

import re
from typing import Any

# The probe's (files/readiness.sh) words in an Unhealthy event, less the kubelet's prefix.
_PROBE_PREFIX = re.compile(r"^Readiness probe failed: (credentials rejected: )?")


def deployment_ready(deployment: Any) -> bool:
    """True when a Deployment's rollout is complete and its pods are ready.

    The controller has seen the current spec (observedGeneration), every replica runs the
    current pod template (updatedReplicas), and as many are ready as are wanted: right
    after a template change the old pod may still count as ready, so readyReplicas alone
    would call a server ready that is being replaced.
    """
    if not isinstance(deployment, dict) or not deployment:
        return False
    metadata = deployment.get("metadata") or {}
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    wanted = int(spec.get("replicas", 1))
    return (int(status.get("observedGeneration") or 0) >= int(metadata.get("generation") or 0)
            and int(status.get("updatedReplicas") or 0) == wanted
            and int(status.get("replicas") or 0) == wanted
            and int(status.get("readyReplicas") or 0) >= wanted >= 1)


def ready_condition(deployment: Any, *, pod: Any, probe_events: Any, database: Any,
                    secret: Any, deployment_name: Any) -> dict[str, Any]:
    """The Ready condition of the instance whose server ``deployment`` runs ({} when it
    does not exist): {type, status, reason, message}. ``pod`` is its pod ({} when it has
    none), ``probe_events`` the pod's readiness-probe Unhealthy events, oldest first (the
    last one says what the probe said last). ``status`` is a boolean: the value
    ansible-core 2.18 makes of a templated 'True'/'False', which the operator's shim
    writes as the condition's string.

    CredentialsRejected: the server runs but refuses the Secret's password (the probe
    prints "credentials rejected" for MySQL's errors 1044, 1045, 1049 and 1130). Else
    NoDeployment, NoPod, Unschedulable (the scheduler's words: no node matches the
    nodeSelector, the affinity, the tolerations or has room for the requests), the reason a
    container waits (CrashLoopBackOff ...), or ServerStarting.
    """
    ready = deployment_ready(deployment)
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}] if pod else [{}]
    # the server's container (a metrics sidecar may be listed before it)
    container = next((s for s in statuses if s.get("name") == "mysql"), statuses[0])
    state = container.get("state") or {}
    waiting = state.get("waiting") or {}
    said = (probe_events[-1] if probe_events else {}).get("message", "")
    words = _PROBE_PREFIX.sub("", said).strip()
    rejected = "running" in state and "credentials rejected" in said
    login = f"a login as root to {database} with the password of Secret {secret}"
    if ready:
        reason, message = "LoginAccepted", f"the server accepts {login}"
    elif rejected:
        reason = "CredentialsRejected"
        message = f"the server runs but rejects {login} (pod {pod['metadata']['name']}): {words}"
    elif not deployment:
        reason, message = "NoDeployment", f"Deployment {deployment_name} does not exist"
    elif not pod:
        reason, message = "NoPod", f"Deployment {deployment_name} has no pod yet"
    elif unscheduled := [c for c in (pod.get("status") or {}).get("conditions") or []
                         if c.get("type") == "PodScheduled" and c.get("status") == "False"]:
        reason = "Unschedulable"
        message = (f"pod {pod['metadata']['name']} is not scheduled:"
                   f" {unscheduled[0].get('message') or unscheduled[0].get('reason')}")
    else:
        name = pod["metadata"]["name"]
        reason = waiting.get("reason") or "ServerStarting"
        if waiting:
            message = f"pod {name}: {waiting.get('message') or waiting['reason']}"
        else:
            message = f"pod {name} is not ready yet" + (f": {words}" if said else "")
    return {"type": "Ready", "status": ready, "reason": reason, "message": message}


class FilterModule:
    """Ansible filter plugin entry point."""

    def filters(self) -> dict[str, Any]:
        return {
            "mysql_deployment_ready": deployment_ready,
            "mysql_ready_condition": ready_condition,
        }
