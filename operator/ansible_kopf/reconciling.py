"""
One reconcile (or finalization) of one object, from lock to status:

1. wait for the object's turn (:mod:`run.concurrency`: one run per object, per-kind and
   global bounds);
2. read the object fresh (a queued run must not use a stale spec or status); if it is gone,
   or is being deleted and this is not the finalizer's run, there is nothing to do;
3. mark ``Running`` if the status does not report this generation yet (:mod:`sdk.status`);
4. run the role or playbook (:mod:`run.runner`) with the object's variables
   (:mod:`sdk.extravars`);
5. read the status again (the role may have written to it) and write the outcome to
   ``.status``: only what changed, nothing if nothing did;
6. log what the run did (:mod:`run.summary`: a sentence, and a line of fields for
   programs), last, so that whoever waits for that line finds the status written.

With ``manageStatus: false`` steps 3 and 5 are skipped. After a successful finalization
the object is about to disappear, so its status is not written either.
kopf-specific reactions (events, retries) are the handlers' business, not this module's;
the failure's wording and the retry delay they use (:func:`describe`, :func:`backoff`) are
here, shared with :mod:`requeues`.
"""
import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import kopf

from ansible_kopf import constants
from ansible_kopf.kube import client, proxy
from ansible_kopf.run import concurrency, runner, runner_events, summary
from ansible_kopf.sdk import durations, extravars, metrics, status, watches

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Controller:
    """Everything needed to reconcile the objects of one watches entry."""
    watch: watches.Watch
    settings: runner.RunSettings
    throttle: concurrency.Throttle
    api: client.ObjectsApi
    runs_proxy: proxy.Proxy | None = None  # None: runs talk to the API server directly
    registry: metrics.Registry | None = None  # where runs and osdk_metric tasks are counted

    @contextlib.contextmanager
    def kubeconfig(self, obj: Mapping[str, Any]) -> Iterator[str | None]:
        """The run's kubeconfig through the proxy, for as long as the run lasts."""
        if self.runs_proxy is None:
            yield None
            return
        with self.runs_proxy.run(proxy.Owner.of(obj, self.watch)) as path:
            yield path

    def job(self, obj: Mapping[str, Any], *, finalizing: bool) -> runner.Job:
        watch = self.watch
        metadata = obj.get('metadata') or {}
        name, namespace = str(metadata.get('name')), metadata.get('namespace')
        target = watch.finalizer.target if finalizing and watch.finalizer else watch.target
        verbosity = annotated_int(obj, constants.ANNOTATION_VERBOSITY, minimum=0)
        return runner.Job(
            target=target,
            roles_path=watch.roles_path,
            private_data_dir=runner.private_data_dir(
                self.settings.workdir, group=watch.group, kind=watch.kind,
                namespace=namespace, name=name),
            extravars=extravars.build(obj, watch, finalizing=finalizing),
            max_artifacts=annotated_int(obj, constants.ANNOTATION_MAX_RUNNER_ARTIFACTS, minimum=1)
            or watch.max_runner_artifacts,
            label=f"{watch.gvk} {namespace}/{name}" if namespace else f"{watch.gvk} {name}",
            verbosity=watch.verbosity if verbosity is None else verbosity,
        )


def annotated_int(obj: Mapping[str, Any], key: str, *, minimum: int) -> int | None:
    """An SDK per-object annotation's number; None when absent or not a number (logged)."""
    raw = ((obj.get('metadata') or {}).get('annotations') or {}).get(key)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        logger.warning(f"annotation {key}={raw!r}: expected a whole number >= {minimum}; ignored")
        return None
    return value


def annotated_period(obj: Mapping[str, Any]) -> float | None:
    """The SDK's reconcile-period annotation in seconds; None when absent or invalid."""
    raw = ((obj.get('metadata') or {}).get('annotations') or {}).get(
        constants.ANNOTATION_RECONCILE_PERIOD)
    if raw is None:
        return None
    try:
        return durations.parse(str(raw)) or None
    except durations.DurationError:
        logger.warning(f"annotation {constants.ANNOTATION_RECONCILE_PERIOD}={raw!r}: "
                       f"not a duration; ignored")
        return None


def _runnable(obj: Mapping[str, Any], watch: watches.Watch, *, finalizing: bool) -> bool:
    """Whether a run for ``obj`` is due: a finalization always; a reconcile unless the object
    is being deleted or was relabelled out of the entry's selector since it was requested
    (a period or a dependent's change requests runs that no kopf filter sees)."""
    if finalizing:
        return True
    metadata = obj.get('metadata') or {}
    return not metadata.get('deletionTimestamp') and watch.selects(metadata.get('labels') or {})


async def reconcile(
        controller: Controller,
        *,
        resource: kopf.Resource,
        namespace: str | None,
        name: str,
        finalizing: bool = False,
        started: Callable[[], None] | None = None,
        reason: str | None = None,
) -> runner_events.Outcome | None:
    """
    Run for the object; return the outcome, or ``None`` if there was nothing to run.
    ``started`` is called when the object's turn has come, before it is read; ``reason``,
    why it runs, is logged once it is read and there is something to run.
    """
    watch, api = controller.watch, controller.api
    async with controller.throttle.hold(obj=(watch.gvk, namespace, name), kind=watch.gvk,
                                        kind_limit=watch.max_concurrent_reconciles):
        if started is not None:
            started()
        obj = await api.get(resource, namespace=namespace, name=name)
        if obj is None or not _runnable(obj, watch, finalizing=finalizing):
            return None
        metadata = obj.get('metadata') or {}
        if reason is not None:
            logger.info(f"{watch.kind} {namespace}/{name}: {reason}" if namespace
                        else f"{watch.kind} {name}: {reason}")
        current: Mapping[str, Any] = obj.get('status') or {}
        generation = metadata.get('generation')

        if watch.manage_status:
            mark = status.running(current, generation=generation, now=status.now())
            if mark is not None:
                await api.patch_status(resource, namespace=namespace, name=name, patch=mark)

        with controller.kubeconfig(obj) as kubeconfig:
            job = dataclasses.replace(controller.job(obj, finalizing=finalizing),
                                      kubeconfig=kubeconfig)
            outcome = await runner.run_async(job, controller.settings)
        if outcome.successful and not outcome.requeue_after and not finalizing:
            # the SDK's reconcile period: the object's annotation (read here, where the object
            # is at hand), else the watches entry's reconcilePeriod; as in the SDK, the next
            # run is requeued that long after a successful one
            period = annotated_period(obj) or watch.reconcile_period
            if period > 0:
                outcome = dataclasses.replace(outcome, requeue_after=period, periodic=True)
        try:
            if watch.manage_status and not (finalizing and outcome.successful):
                await _write_outcome(controller, resource, namespace=namespace, name=name,
                                     outcome=outcome, generation=generation)
        finally:
            # the run's summary comes last, once its status is written: a reader that waits for
            # it (a test, a dashboard) then finds the object as the run left it
            _report(controller, namespace=namespace, name=name, outcome=outcome,
                    finalizing=finalizing)
        return outcome


async def _write_outcome(controller: Controller, resource: kopf.Resource, *, namespace: str | None,
                         name: str, outcome: runner_events.Outcome, generation: Any) -> None:
    """The run's outcome into the object's status (the SDK's conditions), if it changes it."""
    fresh = await controller.api.get(resource, namespace=namespace, name=name)
    if fresh is None:
        return
    result = status.finished(
        fresh.get('status') or {}, successful=outcome.successful,
        counts=outcome.counts.as_dict(), message=outcome.message,
        custom_stats=outcome.custom_stats, generation=generation, now=status.now())
    if result is not None:
        await controller.api.patch_status(resource, namespace=namespace, name=name, patch=result)


def _report(controller: Controller, *, namespace: str | None, name: str,
            outcome: runner_events.Outcome, finalizing: bool) -> None:
    """The run's summary in the log, and its figures in the metrics."""
    watch = controller.watch
    record = summary.Summary(
        action='finalize' if finalizing else 'reconcile', kind=watch.gvk,
        namespace=namespace, name=name, status=outcome.status,
        counts=outcome.counts.as_dict(), seconds=round(outcome.duration, 3),
        finished=summary.now())
    logger.info(record.sentence())
    logger.info(record.line())
    if controller.registry is not None:
        controller.registry.reconciled(gvk=watch.gvk, successful=outcome.successful,
                                       seconds=outcome.duration)
        for request in outcome.metrics:
            controller.registry.user_metric(request)


def backoff(retry: int) -> float:
    """Seconds before the next attempt: 5, 10, 20, ... up to 5 minutes."""
    return float(min(constants.BACKOFF_BASE * 2.0 ** min(retry, 16), constants.BACKOFF_CAP))


def describe(outcome: runner_events.Outcome, *, what: str) -> str:
    task = f" at task {outcome.failed_task!r}" if outcome.failed_task else ''
    return f"{what} failed{task}: {outcome.message}"
