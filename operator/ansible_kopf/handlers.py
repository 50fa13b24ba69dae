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
(:class:`requeues.Requeue`), so nothing of it is running or waiting when the object is deleted.

kopf has one finalizer name per operator: the first ``finalizer.name`` in ``watches.yaml``
(or ``ansible-kopf/finalizer`` if none) is used for all kinds; differing names are logged.

Failures post a Warning event on the object with the failed task's message and are
retried with exponential backoff (kopf keeps the retry count in an annotation).

Runs reach the API server through :mod:`kube.proxy`, which injects owner references and
reports the kinds the runs' objects own; :mod:`kube.dependents` watches those, and
:class:`requeues.Requeue` runs the owner's role again when one of its objects changed.
"""
import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, cast

import kopf
from aiohttp import web

from ansible_kopf import config, constants, reconciling, requeues
from ansible_kopf.kube import client, dependents, proxy
from ansible_kopf.run import concurrency, launchers, runner, runner_events
from ansible_kopf.sdk import metrics, watches
from ansible_kopf.warm import pool

logger = logging.getLogger(__name__)


def spec_changed(diff: Iterable[kopf.DiffItem]) -> bool:
    return any(not item.field or item.field[0] == 'spec' for item in diff)


def _react(body: kopf.Body, outcome: runner_events.Outcome | None, retry: int, *,
           what: str) -> None:
    """Turn a failed run into a Warning event and a retry."""
    if outcome is None or outcome.successful:
        return
    message = reconciling.describe(outcome, what=what)
    kopf.warn(body, reason=f"{what}Failed", message=message[:constants.EVENT_MESSAGE_LIMIT])
    raise kopf.TemporaryError(message, delay=reconciling.backoff(retry))


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
    if outcome is not None and isinstance(requeue, requeues.Requeue):
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
        return watch.matches_expressions(labels)
    return when


ANNOTATIONS: Final = ('metadata', 'annotations')


def _content_changed(watch: watches.Watch) -> Callable[..., bool]:
    """The update filter: the object (still) matches the selector's expressions and an update
    changed more than its metadata: its ``spec``, or the content of a kind without one (a
    Secret's or ConfigMap's ``data``), as the SDK runs a core kind's role when its data
    changes; with ``watchAnnotationsChanges``, its annotations too (kopf leaves its own out
    of the diff). Labels alone run nothing (the SDK's default)."""
    def when(*, labels: Mapping[str, str], diff: Iterable[Any], **_: Any) -> bool:
        if watch.match_expressions and not watch.matches_expressions(labels):
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
    shared = runner.RunSettings(workdir=cfg.workdir, verbosity=cfg.verbosity,
                             log_events=cfg.log_events, kubeconfig=cfg.kubeconfig,
                             launcher=launcher, ansible_args=cfg.ansible_args)
    throttle = concurrency.Throttle(cfg.max_runs)
    api = client.connect()
    upstream = api.upstream()
    requeue = requeues.Requeue()
    watcher = dependents.Watcher(upstream, cfg.namespaces, requeue)
    runs_proxy = proxy.Proxy(
        upstream, cfg.workdir / 'proxy',
        learned=lambda _owner, dependent: watcher.follow(dependent),
        writing=lambda dependent, namespace, name, paths, replace: watcher.wrote(
            dependent, namespace, name, paths, replace=replace),
        annotated={f"{watch.kind}.{watch.group}": watch for watch in entries})
    await runs_proxy.start()
    memo['requeue'], memo['watcher'], memo['proxy'] = requeue, watcher, runs_proxy
    registry = metrics.Registry()
    if cfg.metrics_address is not None:
        memo['metrics'] = await metrics.serve(registry, cfg.metrics_address)
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
        if isinstance(part, requeues.Requeue | dependents.Watcher | proxy.Proxy):
            await part.close()
    served = memo.get('metrics')
    if isinstance(served, web.AppRunner):
        await served.cleanup()
    launcher = memo.get('launcher')
    if isinstance(launcher, launchers.Launcher):
        await asyncio.to_thread(launcher.close)
