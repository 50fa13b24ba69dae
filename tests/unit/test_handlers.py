"""handlers: registration, kopf settings, the filters of updates, and the requeue scheduler kopf does not drive."""
import asyncio
import dataclasses
import logging
import pathlib

import kopf
import pytest

from ansible_kopf import handlers, reconciling, requeues
from ansible_kopf.kube import dependents
from ansible_kopf.run import concurrency, launchers, runner, runner_events
from ansible_kopf.sdk import watches
from ansible_kopf.warm.pool import Pool

TARGET = watches.Runnable(type='role', path=pathlib.Path('/roles/mysql'))
WATCH = watches.Watch(
    group='otus.homework', version='v1', kind='MySQL', target=TARGET, vars={},
    reconcile_period=0.0, manage_status=True, finalizer=None, snake_case_parameters=True,
    mark_unsafe=True, max_concurrent_reconciles=1, max_runner_artifacts=20,
    match_labels={}, roles_path=(),
)


def controller(watch: watches.Watch) -> reconciling.Controller:
    class NoApi:
        async def get(self, *_: object, **__: object) -> None:
            raise AssertionError('not expected to be called')

        async def patch_status(self, *_: object, **__: object) -> None:
            raise AssertionError('not expected to be called')

        async def warn(self, *_: object, **__: object) -> None:
            raise AssertionError('not expected to be called')

    return reconciling.Controller(watch=watch, settings=runner.RunSettings(workdir=pathlib.Path()),
                                  throttle=concurrency.Throttle(1), api=NoApi())


@pytest.mark.parametrize(('retry', 'delay'), [(0, 5), (1, 10), (2, 20), (5, 160), (6, 300),
                                               (1000, 300)])
def test_backoff_is_exponential_and_capped(retry: int, delay: float) -> None:
    assert reconciling.backoff(retry) == delay


def test_spec_changed() -> None:
    op = kopf.DiffOperation.CHANGE
    assert handlers.spec_changed(kopf.Diff([kopf.DiffItem(op, ('spec', 'port'), 1, 2)]))
    assert handlers.spec_changed(kopf.Diff([kopf.DiffItem(op, (), {}, {'spec': {}})]))
    assert not handlers.spec_changed(
        kopf.Diff([kopf.DiffItem(op, ('metadata', 'labels', 'a'), 'x', 'y')]))
    assert not handlers.spec_changed(kopf.Diff([]))


def test_resume_leaves_spec_updates_to_the_update_handler() -> None:
    diff = kopf.Diff([kopf.DiffItem(kopf.DiffOperation.CHANGE, ('spec', 'port'), 1, 2)])
    # param=None would fail loudly if the resume handler went on to reconcile.
    asyncio.run(handlers.resume(body=kopf.Body({}), resource=None,  # type: ignore[arg-type]
                                name='db1', namespace='apps', reason='update', diff=diff))


def test_a_handler_without_a_controller_fails_permanently() -> None:
    with pytest.raises(kopf.PermanentError):
        asyncio.run(handlers.reconcile(body=kopf.Body({}), resource=None,  # type: ignore[arg-type]
                                       name='db1', namespace='apps'))


def test_describe_names_the_failed_task() -> None:
    outcome = runner_events.Outcome(status='failed', rc=2, counts=runner_events.Counts(), failed_task='Apply',
                             message='forbidden', custom_stats={}, ident='i', duration=1.0)
    assert reconciling.describe(outcome, what='Reconcile') == \
        "Reconcile failed at task 'Apply': forbidden"
    outcome = dataclasses.replace(outcome, failed_task=None, message='syntax error')
    assert reconciling.describe(outcome, what='Finalize') == 'Finalize failed: syntax error'


def test_finalizer_name(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger('test')
    assert handlers.finalizer_name([WATCH], logger) == 'ansible-kopf/finalizer'
    first = dataclasses.replace(WATCH, finalizer=watches.Finalizer('a.io/one', TARGET, {}))
    second = dataclasses.replace(WATCH, kind='Backup',
                                 finalizer=watches.Finalizer('a.io/two', TARGET, {}))
    with caplog.at_level(logging.WARNING):
        assert handlers.finalizer_name([WATCH, first, second], logger) == 'a.io/one'
    assert "not 'a.io/two'" in caplog.text


def test_configure_keeps_kopf_state_out_of_status() -> None:
    settings = kopf.OperatorSettings()
    handlers.configure(settings, finalizer='otus.homework/finalizer', namespaced=False)
    assert settings.persistence.finalizer == 'otus.homework/finalizer'
    assert isinstance(settings.persistence.progress_storage, kopf.AnnotationsProgressStorage)
    assert isinstance(settings.persistence.diffbase_storage, kopf.AnnotationsDiffBaseStorage)
    assert settings.persistence.progress_storage.prefix == 'ansible-kopf'
    assert settings.posting.level == logging.WARNING
    assert settings.watching.server_timeout is not None
    assert settings.peering.standalone


def test_a_secrets_content_is_kept_as_a_digest_in_kopfs_annotation() -> None:
    """kopf keeps the last-handled essence in an annotation of the object: for a Secret, its
    data must not land there (kubectl describe shows annotations), but a change must show."""
    storage = handlers.DiffBase(prefix='ansible-kopf', key='last-handled-configuration')

    def secret(value: str) -> kopf.Body:
        return kopf.Body({'apiVersion': 'v1', 'kind': 'Secret', 'type': 'Opaque',
                          'metadata': {'name': 's', 'labels': {'a': 'b'}},
                          'data': {'password': value}, 'stringData': {'token': value}})

    essence = storage.build(body=secret('c2VjcmV0'))
    assert 'c2VjcmV0' not in repr(essence) and essence['metadata'] == {'labels': {'a': 'b'}}
    assert storage.build(body=secret('b3RoZXI=')) != essence
    configmap = kopf.Body({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'c'},
                           'data': {'k': 'v'}})
    assert storage.build(body=configmap)['data'] == {'k': 'v'}


def test_an_update_runs_the_role_when_more_than_metadata_changed() -> None:
    when = handlers._content_changed(WATCH)
    assert when(labels={}, diff=[('change', ('spec', 'image'), 'a', 'b')])
    assert when(labels={}, diff=[('add', ('data', 'new'), None, 'x')])
    assert not when(labels={}, diff=[('change', ('metadata', 'labels', 'a'), 'x', 'y')])
    assert not when(labels={}, diff=[])
    annotation = ('change', ('metadata', 'annotations', 'a'), 'x', 'y')
    assert not when(labels={}, diff=[annotation])  # the SDK's default


def test_watch_annotations_changes_runs_the_role_for_an_annotation_alone() -> None:
    when = handlers._content_changed(dataclasses.replace(WATCH, watch_annotations=True))
    assert when(labels={}, diff=[('change', ('metadata', 'annotations', 'a'), 'x', 'y')])
    assert when(labels={}, diff=[('add', ('metadata', 'annotations'), None, {'a': 'x'})])
    assert when(labels={}, diff=[('add', ('metadata',), None, {'annotations': {'a': 'x'}})])
    assert not when(labels={}, diff=[('change', ('metadata', 'labels', 'a'), 'x', 'y')])
    assert not when(labels={}, diff=[('add', ('metadata',), None, {'labels': {'a': 'x'}})])


def test_configure_skips_cluster_scans_only_for_fixed_namespaces() -> None:
    settings = kopf.OperatorSettings()
    handlers.configure(settings, finalizer='a.io/f', namespaced=True)
    assert settings.scanning.disabled
    handlers.configure(settings, finalizer='a.io/f', namespaced=False)
    assert not settings.scanning.disabled


def test_register_per_entry() -> None:
    plain = controller(WATCH)
    full = controller(dataclasses.replace(
        WATCH, kind='Backup', reconcile_period=90.0, match_labels={'tier': 'db'},
        finalizer=watches.Finalizer('otus.homework/finalizer', TARGET, {})))
    registry = kopf.OperatorRegistry()
    handlers.register(registry, [plain, full])

    # kopf has no public listing of registered handlers; its registries are read here.
    changing = registry._changing.get_all_handlers()
    by_kind: dict[str, list[kopf.HandlerId]] = {}
    for handler in changing:
        assert handler.selector is not None
        by_kind.setdefault(str(handler.selector.kind), []).append(handler.id)
        assert handler.param in (plain, full)
    assert sorted(by_kind['MySQL']) == ['reconcile-create', 'reconcile-resume',
                                        'reconcile-update']
    assert sorted(by_kind['Backup']) == ['finalize', 'reconcile-create', 'reconcile-resume',
                                         'reconcile-update']
    update = next(h for h in changing if h.id == 'reconcile-update')
    assert update.field is None and update.when is not None  # spec, or a Secret's data
    backup_create = next(h for h in changing if h.param is full and h.id == 'reconcile-create')
    assert backup_create.labels == {'tier': 'db'}

    # reconcilePeriod is no kopf timer (a successful run requeues its object, see Requeue):
    # nothing of it runs or waits in kopf when the object is deleted
    assert not registry._spawning.get_all_handlers()


def test_a_later_request_replaces_the_earlier_one_and_keeps_its_reason() -> None:
    requeue = requeues.Requeue()
    seen: list[str] = []
    requeue._queue = lambda owner, reason: seen.append(reason)  # type: ignore[method-assign]
    owner = dependents.OwnerKey('otus.homework', 'MySQL', 'ns', 'db')

    async def go() -> None:
        requeue.later(owner, 0.05, requeues.REQUEUED)
        requeue.later(owner, 0.01, requeues.PERIODIC)
        await asyncio.sleep(0.2)

    asyncio.run(go())
    assert seen == [requeues.PERIODIC]
    assert not requeue._timers


def test_cleanup_closes_the_warm_pool(tmp_path: pathlib.Path) -> None:
    pool = Pool(tmp_path / 'warm')
    assert pool.interpreter() != pool.python  # open: modules go to its module server
    asyncio.run(handlers.cleanup(memo=kopf.Memo(launcher=launchers.Warm(pool))))
    assert pool.interpreter() == pool.python  # closed: every run is cold
    asyncio.run(handlers.cleanup(memo=kopf.Memo()))  # warm servers turned off: nothing to do


def test_match_expressions_become_a_when_filter() -> None:
    selecting = controller(dataclasses.replace(WATCH, match_expressions=(
        watches.Requirement('tier', 'In', frozenset({'db'})),)))
    registry = kopf.OperatorRegistry()
    handlers.register(registry, [selecting, controller(dataclasses.replace(WATCH, kind='Other'))])
    by_kind = {str(h.selector.kind): h for h in registry._changing.get_all_handlers()
               if h.id == 'reconcile-create' and h.selector is not None}
    when = by_kind['MySQL'].when
    assert when is not None
    assert when(labels={'tier': 'db'}) and not when(labels={'tier': 'web'}) and not when(labels={})
    assert by_kind['Other'].when is None


@pytest.mark.parametrize(('status_watched', 'status_only', 'kind', 'queued'),
                         [(False, False, 'Deployment', True), (False, True, 'Deployment', False),
                          (True, True, 'Deployment', True), (True, False, 'ConfigMap', False)])
def test_a_dependents_change_runs_its_owner_unless_status_only_or_blacklisted(
        status_watched: bool, status_only: bool, kind: str, queued: bool) -> None:
    requeue = requeues.Requeue()
    watch = dataclasses.replace(WATCH, watch_dependent_status=status_watched,
                                blacklist=frozenset({('', 'v1', 'ConfigMap')}))
    requeue.add(controller(watch), kopf.Resource('otus.homework', 'v1', 'mysqls', namespaced=True))
    seen: list[str] = []
    requeue._queue = lambda owner, reason: seen.append(reason)  # type: ignore[method-assign]
    group, version = ('apps', 'v1') if kind == 'Deployment' else ('', 'v1')
    requeue(dependents.Change(dependents.OwnerKey('otus.homework', 'MySQL', 'ns', 'db'),
                              group, version, kind, status_only))
    assert bool(seen) == queued


class WarningsApi:
    """The object as the API server has it, and the Warning Events posted about it."""

    def __init__(self) -> None:
        self.warnings: list[tuple[str, str]] = []

    async def get(self, *_: object, **__: object) -> dict[str, object]:
        return {'apiVersion': 'otus.homework/v1', 'kind': 'MySQL', 'metadata': {'name': 'db', 'namespace': 'ns'}}

    async def patch_status(self, *_: object, **__: object) -> None:
        return None

    async def warn(self, obj: object, *, reason: str, message: str) -> None:
        self.warnings.append((reason, message))


@pytest.mark.parametrize('raises', [False, True])
def test_a_failed_requeued_run_posts_its_warning_and_is_tried_again_after_the_backoff(
        monkeypatch: pytest.MonkeyPatch, raises: bool) -> None:
    """A run no kopf handler made (a dependent changed): its failure, or an exception out of
    it, schedules the next try with the handlers' backoff; a failure posts a Warning Event
    through the operator's API client."""
    api = WarningsApi()
    requeue = requeues.Requeue()
    requeue.add(dataclasses.replace(controller(WATCH), api=api),
                kopf.Resource('otus.homework', 'v1', 'mysqls', namespaced=True))
    runs: list[str] = []

    async def reconcile(*_: object, reason: str | None = None, **__: object) -> runner_events.Outcome:
        runs.append(str(reason))
        if raises:
            raise RuntimeError('the API server went away')
        return runner_events.Outcome(status='failed', rc=2, counts=runner_events.Counts(), failed_task='t',
                                     message='no', custom_stats={}, ident='r', duration=0.1)

    monkeypatch.setattr(reconciling, 'reconcile', reconcile)
    monkeypatch.setattr(reconciling, 'backoff', lambda retry: 0.05 * (retry + 1))
    owner = dependents.OwnerKey('otus.homework', 'MySQL', 'ns', 'db')

    async def go() -> None:
        requeue._queue(owner, requeues.DEPENDENT_CHANGED)
        await asyncio.sleep(0.4)
        await requeue.close()

    asyncio.run(go())
    assert runs[0] == requeues.DEPENDENT_CHANGED and len(runs) >= 3, runs
    assert set(runs[1:]) == {requeues.REQUEUED}
    if raises:
        assert api.warnings == []
    else:
        assert api.warnings and all(reason == 'ReconcileFailed' and "at task 't'" in message
                                    for reason, message in api.warnings), api.warnings
