"""
Leader for life: the operator pod's init container waits here until its pod holds the
lock, so that two operator pods never reconcile at the same time (the kopf shim runs
standalone, without kopf's peering).

This is how the Operator SDK's operators elect their leader (``leader.Become``): the lock
is a ConfigMap whose owner reference is the leader's Pod, so it lives exactly as long as
that pod. Kubernetes' garbage collector deletes it once the pod object is gone, which is
after the pod's containers have stopped; the next pod's init container then takes it.
A lock whose owner pod no longer exists, has another uid, or has terminated (phase Failed,
e.g. evicted, or Succeeded) is taken over at once. A pod stuck on an unreachable node
keeps the lock until it is deleted (``kubectl delete pod --force``), as with the SDK.

Environment: ``POD_NAME``, ``POD_NAMESPACE``, ``POD_UID`` (from the downward API),
``LOCK_NAME`` (default ``mysql-operator-lock``), ``LOCK_MAX_WAIT_SECONDS`` (the longest
pause between two attempts, default 10).

Needs, in the pod's namespace: configmaps get/create/delete and pods get.
"""
import logging
import os
import sys
import time
from typing import Any, Final

import kubernetes

logger = logging.getLogger('leader-for-life')

HTTP_NOT_FOUND: Final = 404
HTTP_CONFLICT: Final = 409
TERMINATED_PHASES: Final = ('Failed', 'Succeeded')
LOG_EVERY: Final = 60.0  # seconds between two "still waiting" lines


def lock_body(name: str, namespace: str, pod: str, uid: str) -> dict[str, Any]:
    return {
        'apiVersion': 'v1',
        'kind': 'ConfigMap',
        'metadata': {
            'name': name,
            'namespace': namespace,
            'labels': {'app.kubernetes.io/name': 'mysql-operator',
                       'app.kubernetes.io/component': 'leader-lock'},
            'ownerReferences': [{'apiVersion': 'v1', 'kind': 'Pod', 'name': pod, 'uid': uid}],
        },
        'data': {'leader': pod},
    }


def lock_owner(lock: Any) -> tuple[str, str] | None:
    """(name, uid) of the Pod owning the lock, if any."""
    for ref in lock.metadata.owner_references or []:
        if ref.kind == 'Pod':
            return ref.name, ref.uid
    return None


def stale_reason(api: Any, namespace: str, owner: tuple[str, str] | None) -> str | None:
    """Why the lock can be taken over, or ``None`` while its owner may still run."""
    if owner is None:
        return 'it has no owner pod'
    name, uid = owner
    try:
        pod = api.read_namespaced_pod(name, namespace)
    except kubernetes.client.ApiException as e:
        if e.status == HTTP_NOT_FOUND:
            return f"its owner pod {name} is gone"
        raise
    if pod.metadata.uid != uid:
        return f"its owner pod {name} was replaced by another pod of that name"
    if pod.status.phase in TERMINATED_PHASES:
        return f"its owner pod {name} has terminated ({pod.status.phase}, {pod.status.reason})"
    return None


def become_leader(api: Any, *, name: str, namespace: str, pod: str, uid: str,
                  max_wait: float) -> None:
    """Return once this pod owns the lock; wait (with backoff) while another pod does."""
    delay, last_log = 1.0, 0.0
    while True:
        try:
            api.create_namespaced_config_map(namespace, lock_body(name, namespace, pod, uid))
            logger.info(f"{pod} is the leader: it owns the ConfigMap {namespace}/{name}")
            return
        except kubernetes.client.ApiException as e:
            if e.status != HTTP_CONFLICT:
                raise
        try:
            lock = api.read_namespaced_config_map(name, namespace)
        except kubernetes.client.ApiException as e:
            if e.status == HTTP_NOT_FOUND:  # released meanwhile: try again at once
                continue
            raise
        owner = lock_owner(lock)
        if owner is not None and owner[1] == uid:
            logger.info(f"{pod} already owns the ConfigMap {namespace}/{name}")
            return
        reason = stale_reason(api, namespace, owner)
        if reason is not None:
            logger.info(f"taking over the ConfigMap {namespace}/{name}: {reason}")
            try:
                api.delete_namespaced_config_map(
                    name, namespace, body=kubernetes.client.V1DeleteOptions(
                        preconditions=kubernetes.client.V1Preconditions(uid=lock.metadata.uid)))
            except kubernetes.client.ApiException as e:
                if e.status not in (HTTP_NOT_FOUND, HTTP_CONFLICT):  # someone else was faster
                    raise
            continue
        if time.monotonic() - last_log >= LOG_EVERY:
            leader = owner[0] if owner else '?'
            logger.info(f"waiting: the leader is {leader} (ConfigMap {namespace}/{name})")
            last_log = time.monotonic()
        time.sleep(delay)
        delay = min(delay * 2, max_wait)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format='%(asctime)s %(name)s: %(message)s')
    try:
        pod, namespace, uid = (os.environ[k] for k in ('POD_NAME', 'POD_NAMESPACE', 'POD_UID'))
    except KeyError as e:
        logger.error(f"the environment variable {e.args[0]} is not set (downward API)")
        return 2
    name = os.environ.get('LOCK_NAME') or 'mysql-operator-lock'
    max_wait = float(os.environ.get('LOCK_MAX_WAIT_SECONDS') or 10)
    kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    api = kubernetes.client.CoreV1Api()
    become_leader(api, name=name, namespace=namespace, pod=pod, uid=uid, max_wait=max_wait)
    return 0


if __name__ == '__main__':
    sys.exit(main())
