"""
The kopf surface of the operator: start-up (read the configuration and ``watches.yaml``,
configure kopf, register the handlers of every entry) and the handlers themselves.

Importing this module registers only the start-up activity in kopf's default registry;
the resource handlers are registered by it, once ``watches.yaml`` is known (kopf starts
observing resources after the start-up activities have finished). So both work::

    python -m ansible_kopf                 # production: see __main__
    kopf run -m ansible_kopf.handlers -A   # development: kopf's CLI flags apply

Per entry: ``on.create``, ``on.update`` (spec changes only) and ``on.resume`` reconcile;
with a ``finalizer``, ``on.delete`` runs the finalizer's role/playbook and keeps the object
until it succeeds. A ``reconcilePeriod`` (or the object's reconcile-period annotation) is
not a kopf timer: as in the SDK, a successful run requeues the object that long after it
(:class:`Requeue`), so nothing of it is running or waiting when the object is deleted.

kopf has one finalizer name per operator: the first ``finalizer.name`` in ``watches.yaml``
(or ``ansible-kopf/finalizer`` if none) is used for all kinds; differing names are logged.

Failures post a Warning event on the object with the failed task's message and are
retried with exponential backoff (kopf keeps the retry count in an annotation).

Runs reach the API server through :mod:`proxy`, which injects owner references and
reports the kinds the runs' objects own; :mod:`dependents` watches those, and
:class:`Requeue` runs the owner's role again when one of its objects changed.
"""
import asyncio
import contextvars
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, cast

import kopf
from aiohttp import web

from ansible_kopf import (
    config,
    constants,
    dependents,
    events,
    kubeapi,
    launchers,
    locks,
    metrics,
    proxy,
    reconciling,
    runner,
    watches,
)
from ansible_kopf.warm import pool

logger = logging.getLogger(__name__)


def backoff(retry: int) -> float:
    """Seconds before the next attempt: 5, 10, 20, ... up to 5 minutes."""
    return float(min(constants.BACKOFF_BASE * 2.0 ** min(retry, 16), constants.BACKOFF_CAP))


def spec_changed(diff: Iterable[kopf.DiffItem]) -> bool:
    return any(not item.field or item.field[0] == 'spec' for item in diff)


def describe(outcome: events.Outcome, *, what: str) -> str:
    task = f" at task {outcome.failed_task!r}" if outcome.failed_task else ''
    return f"{what} failed{task}: {outcome.message}"


def _react(body: kopf.Body, outcome: events.Outcome | None, retry: int, *, what: str) -> None:
    """Turn a failed run into a Warning event and a retry."""
    if outcome is None or outcome.successful:
        return
    message = describe(outcome, what=what)
    kopf.warn(body, reason=f"{what}Failed", message=message[:constants.EVENT_MESSAGE_LIMIT])
    raise kopf.TemporaryError(message, delay=backoff(retry))


def _controller(param: Any) -> reconciling.Controller:
    if not isinstance(param, reconciling.Controller):  # registered by register() only
        raise kopf.PermanentError(f"handler registered without a controller: {param!r}")
    return param


async def reconcile(*, body: kopf.Body, resource: kopf.Resource, name: str,
                    namespace: str | None, param: Any = None, retry: int = 0,
                    memo: kopf.Memo | None = None, **_: Any) -> None:
    controller = _controller(param)
    outcome = await reconciling.reconcile(controller, resource=resource,
                                          namespace=namespace, name=name)
    _react(body, outcome, retry, what='Reconcile')
    requeue = memo.get('requeue') if memo is not None else None
    if outcome is not None and isinstance(requeue, Requeue):
        requeue.after_run(dependents.OwnerKey(controller.watch.group, controller.watch.kind,
                                              namespace, name), outcome)


async def resume(*, body: kopf.Body, resource: kopf.Resource, name: str,
                 namespace: str | None, reason: str, diff: kopf.Diff, param: Any = None,
                 retry: int = 0, memo: kopf.Memo | None = None, **_: Any) -> None:
    if reason == kopf.Reason.UPDATE and spec_changed(diff):
        return  # the spec-update handler of the same cycle runs instead
    await reconcile(body=body, resource=resource, name=name, namespace=namespace,
                    param=param, retry=retry, memo=memo)


async def finalize(*, body: kopf.Body, resource: kopf.Resource, name: str,
                   namespace: str | None, param: Any = None, retry: int = 0,
                   **_: Any) -> None:
    outcome = await reconciling.reconcile(_controller(param), resource=resource,
                                          namespace=namespace, name=name, finalizing=True)
    _react(body, outcome, retry, what='Finalize')


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
        self._context = contextvars.copy_context()  # kopf's, for its event posting

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

    def after_run(self, owner: dependents.OwnerKey, outcome: events.Outcome) -> None:
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
        task = asyncio.get_running_loop().create_task(self._run(owner, *target, reason=reason),
                                                      context=self._context.copy())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _run(self, owner: dependents.OwnerKey, controller: reconciling.Controller,
                   resource: kopf.Resource, *, reason: str) -> None:
        namespace = owner.namespace if resource.namespaced else None
        key = f"{owner.namespace}/{owner.name}" if namespace else owner.name
        try:
            outcome = await reconciling.reconcile(
                controller, resource=resource, namespace=namespace, name=owner.name,
                started=lambda: self._waiting.discard(owner), reason=reason)
        except Exception:
            logger.exception(f"{owner.kind} {key}: the reconcile failed")
            outcome = None
        finally:
            self._waiting.discard(owner)
        if outcome is None or outcome.successful:
            self._retries.pop(owner, None)
            if outcome is not None:
                self.after_run(owner, outcome)
            return
        retry = self._retries.get(owner, 0)
        self._retries[owner] = retry + 1
        body = await controller.api.get(resource, namespace=namespace, name=owner.name)
        if body is not None:
            message = describe(outcome, what='Reconcile')
            kopf.warn(kopf.Body(cast(kopf.RawBody, body)), reason='ReconcileFailed',
                      message=message[:constants.EVENT_MESSAGE_LIMIT])
        self.later(owner, backoff(retry))


async def serve_metrics(registry: metrics.Registry, address: tuple[str, int],
                        logger: kopf.Logger) -> web.AppRunner | None:
    """``/metrics`` on ``address``; ``None`` (and a warning) if it cannot listen there."""
    async def scrape(_: web.Request) -> web.Response:
        return web.Response(text=registry.render(), content_type='text/plain',
                            charset='utf-8', headers={'X-Content-Format': '0.0.4'})

    app = web.Application()
    app.router.add_get(constants.METRICS_PATH, scrape)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, *address).start()
    except OSError as e:
        logger.warning(f"no metrics endpoint: cannot listen on {address[0]}:{address[1]}: {e}")
        await runner.cleanup()
        return None
    logger.info(f"Metrics at http://{address[0]}:{address[1]}{constants.METRICS_PATH}")
    return runner


def finalizer_name(entries: Sequence[watches.Watch], logger: kopf.Logger) -> str:
    names = [w.finalizer.name for w in entries if w.finalizer is not None]
    if not names:
        return constants.DEFAULT_FINALIZER
    for other in sorted(set(names) - {names[0]}):
        logger.warning(f"kopf supports one finalizer per operator: using {names[0]!r} "
                       f"for all kinds, not {other!r}")
    return names[0]


class DiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's last-handled essence in an annotation, with a Secret's content as a digest: the
    essence is stored on the object itself, and an annotation is shown where a Secret's data
    is not (``kubectl describe``). A change of the content still changes the digest."""

    def build(self, *, body: kopf.Body,
              extra_fields: Iterable[Any] | None = None) -> kopf.BodyEssence:
        essence = super().build(body=body, extra_fields=extra_fields)
        if body.get('apiVersion') == 'v1' and body.get('kind') == 'Secret':
            content = cast(dict[str, Any], essence)
            for key in ('data', 'stringData'):
                if key in content:
                    text = json.dumps(content[key], sort_keys=True).encode()
                    content[key] = {'sha256': hashlib.sha256(text).hexdigest()}
        return essence


def configure(settings: kopf.OperatorSettings, *, finalizer: str, namespaced: bool) -> None:
    settings.persistence.finalizer = finalizer
    # Watching fixed namespaces needs no cluster-wide scans of namespaces and CRDs; without
    # the RBAC for them kopf would retry each 403 for about a minute before falling back.
    settings.scanning.disabled = namespaced
    # kopf's bookkeeping goes to annotations with our prefix, so .status stays the role's.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=constants.ANNOTATION_PREFIX)
    settings.persistence.diffbase_storage = DiffBase(
        prefix=constants.ANNOTATION_PREFIX, key='last-handled-configuration')
    settings.posting.level = logging.WARNING  # only explicit warnings become Events
    settings.watching.server_timeout = 300  # the API server ends each watch; kopf resumes
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.peering.standalone = True  # a single replica; no peering CRDs needed


def _expressions_filter(watch: watches.Watch) -> Callable[..., bool]:
    """A kopf ``when=`` filter: the object matches ``selector.matchExpressions``."""
    def when(*, labels: Mapping[str, str], **_: Any) -> bool:
        return watch.selects(labels)
    return when


ANNOTATIONS: Final = ('metadata', 'annotations')


def _content_changed(watch: watches.Watch) -> Callable[..., bool]:
    """The update filter: the object (still) matches the selector's expressions and an update
    changed more than its metadata: its ``spec``, or the content of a kind without one (a
    Secret's or ConfigMap's ``data``), as the SDK runs a core kind's role when its data
    changes; with ``watchAnnotationsChanges``, its annotations too (kopf leaves its own out
    of the diff). Labels alone run nothing (the SDK's default)."""
    def when(*, labels: Mapping[str, str], diff: Iterable[Any], **_: Any) -> bool:
        if watch.match_expressions and not watch.selects(labels):
            return False
        return any(not item[1] or item[1][0] not in ('metadata', 'status')
                   or (watch.watch_annotations and _annotations(item)) for item in diff)
    return when


def _annotations(item: Any) -> bool:
    """Whether a kopf diff item changes annotations (or adds/removes a metadata holding them)."""
    path = tuple(item[1])
    if path[:2] == ANNOTATIONS:
        return True
    return path == ANNOTATIONS[:1] and any(
        isinstance(value, Mapping) and 'annotations' in value for value in item[2:4])


def register(registry: kopf.OperatorRegistry,
             controllers: Iterable[reconciling.Controller]) -> None:
    """Register the resource handlers of every watches entry."""
    for controller in controllers:
        watch = controller.watch
        selector: dict[str, Any] = {
            'group': watch.group, 'version': watch.version, 'kind': watch.kind,
            'labels': dict(watch.match_labels) or None,
            'when': _expressions_filter(watch) if watch.match_expressions else None,
            'param': controller, 'registry': registry,
        }
        kopf.on.create(id='reconcile-create', **selector)(reconcile)
        kopf.on.update(id='reconcile-update', **{**selector, 'when': _content_changed(watch)})(
            reconcile)
        kopf.on.resume(id='reconcile-resume', **selector)(resume)
        if watch.finalizer is not None:
            kopf.on.delete(id='finalize', **selector)(finalize)


def load() -> tuple[config.Config, tuple[watches.Watch, ...]]:
    """The configuration and the watches file (raises their errors)."""
    cfg = config.from_env()
    return cfg, watches.load(cfg.watches_file,
                             default_max_runner_artifacts=cfg.max_runner_artifacts,
                             defaults=cfg.defaults)


@kopf.on.startup()
async def startup(*, settings: kopf.OperatorSettings, logger: kopf.Logger, memo: kopf.Memo,
                  **_: Any) -> None:
    loaded = memo.get('loaded')  # by __main__, which checked them before kopf started
    if loaded is None:  # started as `kopf run -m ansible_kopf.handlers`
        try:
            loaded = load()
        except (config.ConfigError, watches.WatchesError) as e:
            raise kopf.PermanentError(str(e)) from None
    cfg, entries = loaded
    configure(settings, finalizer=finalizer_name(entries, logger), namespaced=not cfg.clusterwide)
    launcher: launchers.Launcher = launchers.Cold()
    if cfg.warm:
        launcher = launchers.Warm(pool.Pool(cfg.workdir / 'warm', idle_timeout=cfg.warm_idle))
    memo['launcher'] = launcher
    shared = runner.Settings(workdir=cfg.workdir, verbosity=cfg.verbosity,
                             log_events=cfg.log_events, kubeconfig=cfg.kubeconfig,
                             launcher=launcher, ansible_args=cfg.ansible_args)
    throttle = locks.Throttle(cfg.max_runs)
    api = kubeapi.connect()
    upstream = api.upstream()
    requeue = Requeue()
    watcher = dependents.Watcher(upstream, cfg.namespaces, requeue)
    runs_proxy = proxy.Proxy(
        upstream, cfg.workdir / 'proxy',
        learned=lambda _owner, dependent: watcher.follow(dependent),
        writing=lambda dependent, namespace, name, paths, replace: watcher.wrote(
            dependent, namespace, name, paths, replace=replace))
    await runs_proxy.start()
    memo['requeue'], memo['watcher'], memo['proxy'] = requeue, watcher, runs_proxy
    registry = metrics.Registry()
    if cfg.metrics_address is not None:
        memo['metrics'] = await serve_metrics(registry, cfg.metrics_address, logger)
    controllers = [reconciling.Controller(watch=watch, settings=shared, throttle=throttle,
                                          api=api, runs_proxy=runs_proxy, registry=registry)
                   for watch in entries]
    register(kopf.get_default_registry(), controllers)
    for controller in controllers:
        watch = controller.watch
        logger.info(f"Watching {watch.gvk} with {watch.target.type} {watch.target.path}")
        resource = await api.resource(watch.group, watch.version, watch.kind)
        if resource is None:
            logger.warning(f"{watch.gvk} is not served: changes to the objects it owns and "
                           f"requeue_after requests are not followed until the operator restarts")
        else:
            requeue.add(controller, resource)


@kopf.on.cleanup()
async def cleanup(*, memo: kopf.Memo, **_: Any) -> None:
    """
    Stop following dependents, stop the proxy, and stop the warm Ansible servers (they
    would also stop on their own: they watch us).
    """
    for name in ('requeue', 'watcher', 'proxy'):
        part = memo.get(name)
        if isinstance(part, Requeue | dependents.Watcher | proxy.Proxy):
            await part.close()
    served = memo.get('metrics')
    if isinstance(served, web.AppRunner):
        await served.cleanup()
    launcher = memo.get('launcher')
    if isinstance(launcher, launchers.Launcher):
        await asyncio.to_thread(launcher.close)
