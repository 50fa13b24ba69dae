"""
The runs of a watched object's role that no kopf event starts, as the Operator SDK requeues
them: an object the watched one owns changed (:mod:`kube.dependents` reports it), the last
run asked for another after a delay (``operator_sdk.util.requeue_after``), or the object's
reconcile period passed since its last successful run. Each becomes a call of
:func:`reconciling.reconcile`, on kopf's event loop, outside kopf's handlers: so a failure
here is retried with the handlers' backoff and posts its Warning event itself, through the
operator's API client (kopf posts Events only from its handlers' tasks).
"""
import asyncio
import logging
from typing import Final

import kopf

from ansible_kopf import constants, reconciling
from ansible_kopf.kube import dependents
from ansible_kopf.run import runner_events

logger = logging.getLogger(__name__)


DEPENDENT_CHANGED: Final = 'an object it owns changed, reconciling'
DEPENDENT_STATUS_CHANGED: Final = "the status of an object it owns changed, reconciling"
REQUEUED: Final = 'requeued by its last run (requeue_after), reconciling'
PERIODIC: Final = 'its reconcile period has passed since its last run, reconciling'


class Requeue:
    """
    Runs of a watched object's role that no kopf event starts: one of its dependents changed
    (the SDK requeues the owner), or its last run asked for another after a delay
    (``operator_sdk.util.requeue_after``), or its reconcile period has passed since its last
    successful run. At most one delayed request per object is kept (a later one replaces it),
    and a request for an object that is gone or being deleted runs nothing. At most one run
    per object waits for its turn: a request while one waits adds none, a request while one
    runs queues one more. A failed run posts a Warning event and is tried again after the
    same backoff as kopf's retries.
    """

    def __init__(self) -> None:
        self._kinds: dict[tuple[str, str], tuple[reconciling.Controller, kopf.Resource]] = {}
        self._waiting: set[dependents.OwnerKey] = set()
        self._retries: dict[dependents.OwnerKey, int] = {}
        self._timers: dict[dependents.OwnerKey, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, controller: reconciling.Controller, resource: kopf.Resource) -> None:
        self._kinds[(controller.watch.group, controller.watch.kind)] = (controller, resource)

    def __call__(self, change: dependents.Change) -> None:
        """A dependent of ``change.owner`` changed."""
        target = self._kinds.get((change.owner.group, change.owner.kind))
        if target is None:
            return
        watch = target[0].watch
        if (not watch.watch_dependents or (change.status_only and not watch.watch_dependent_status)
                or (change.group, change.version, change.kind) in watch.blacklist):
            return
        reason = DEPENDENT_STATUS_CHANGED if change.status_only else DEPENDENT_CHANGED
        self._queue(change.owner, reason=f"{reason} ({change.kind} {change.name})"
                    if change.name else reason)

    def later(self, owner: dependents.OwnerKey, delay: float, reason: str = REQUEUED) -> None:
        """Run for ``owner`` again in ``delay`` seconds (replacing an earlier request)."""
        timer = self._timers.pop(owner, None)
        if timer is not None:
            timer.cancel()
        self._timers[owner] = asyncio.get_running_loop().call_later(
            delay, self._due, owner, reason)

    def after_run(self, owner: dependents.OwnerKey, outcome: runner_events.Outcome) -> None:
        """Request the next run that ``outcome`` asks for (its requeue_after or period), if any."""
        if outcome.requeue_after:
            self.later(owner, outcome.requeue_after, PERIODIC if outcome.periodic else REQUEUED)

    def _due(self, owner: dependents.OwnerKey, reason: str) -> None:
        self._timers.pop(owner, None)
        self._queue(owner, reason)

    def _queue(self, owner: dependents.OwnerKey, reason: str) -> None:
        target = self._kinds.get((owner.group, owner.kind))
        if target is None or owner in self._waiting:
            return
        self._waiting.add(owner)
        task = asyncio.get_running_loop().create_task(self._run(owner, *target, reason=reason))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _retry(self, owner: dependents.OwnerKey) -> None:
        """Run for ``owner`` again after the handlers' backoff, one step longer each time."""
        retry = self._retries.get(owner, 0)
        self._retries[owner] = retry + 1
        self.later(owner, reconciling.backoff(retry))

    async def _run(self, owner: dependents.OwnerKey, controller: reconciling.Controller,
                   resource: kopf.Resource, *, reason: str) -> None:
        namespace = owner.namespace if resource.namespaced else None
        key = f"{owner.namespace}/{owner.name}" if namespace else owner.name
        try:
            outcome = await reconciling.reconcile(
                controller, resource=resource, namespace=namespace, name=owner.name,
                started=lambda: self._waiting.discard(owner), reason=reason)
        except Exception:
            logger.exception(f"{owner.kind} {key}: the reconcile failed; it is tried again")
            self._retry(owner)
            return
        finally:
            self._waiting.discard(owner)
        if outcome is None or outcome.successful:
            self._retries.pop(owner, None)
            if outcome is not None:
                self.after_run(owner, outcome)
            return
        self._retry(owner)  # first: whatever the Event's fate
        # (kopf.warn posts only from inside kopf's handler tasks, which this is not)
        message = reconciling.describe(outcome, what='Reconcile')
        try:
            body = await controller.api.get(resource, namespace=namespace, name=owner.name)
            if body is not None:
                await controller.api.warn(body, reason='ReconcileFailed',
                                          message=message[:constants.EVENT_MESSAGE_LIMIT])
        except Exception:
            logger.exception(f"{owner.kind} {key}: could not post the Warning event: {message}")
