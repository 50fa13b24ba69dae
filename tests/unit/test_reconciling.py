"""
Reconciling against an in-memory stand-in for the API (a test double of our own
:class:`kubeapi.ObjectsApi` protocol, not of Kubernetes) with real ansible runs on
localhost. What is checked is this module's sequencing: fresh read, Running mark, run,
final status, and above all the writes it does *not* make.
"""
import asyncio
import copy
import dataclasses
import pathlib
import textwrap
from collections.abc import Mapping
from typing import Any

import kopf
import pytest

from ansible_kopf import constants, reconciling
from ansible_kopf.run import concurrency, runner, summary
from ansible_kopf.sdk import watches

pytestmark = pytest.mark.ansible

RESOURCE = kopf.Resource(group='otus.homework', version='v1', plural='mysqls',
                         kind='MySQL', namespaced=True, subresources=frozenset({'status'}))


class FakeApi:
    """One object in memory; status patches merged like a JSON merge patch at top level."""

    def __init__(self, obj: dict[str, Any] | None) -> None:
        self.obj = obj
        self.patches: list[dict[str, Any]] = []
        self.gets = 0

    async def get(self, resource: kopf.Resource, *, namespace: str | None,
                  name: str) -> dict[str, Any] | None:
        self.gets += 1
        return copy.deepcopy(self.obj)

    async def patch_status(self, resource: kopf.Resource, *, namespace: str | None, name: str,
                           patch: Mapping[str, Any]) -> dict[str, Any] | None:
        assert self.obj is not None
        self.patches.append(dict(patch))
        self.obj['status'] = {**(self.obj.get('status') or {}), **patch}
        return copy.deepcopy(self.obj)


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    tasks = tmp_path / 'roles' / 'db' / 'tasks'
    tasks.mkdir(parents=True)
    (tasks / 'main.yml').write_text(textwrap.dedent("""
        - name: Fail when asked to
          ansible.builtin.fail:
            msg: "asked to fail for {{ ansible_operator_meta.name }}"
          when: fail_please | default(false) | bool
        - name: Publish the endpoint
          ansible.builtin.set_stats:
            data:
              endpoint: "{{ ansible_operator_meta.name }}:{{ port }}"
    """))
    cleanup = tmp_path / 'roles' / 'cleanup' / 'tasks'
    cleanup.mkdir(parents=True)
    (cleanup / 'main.yml').write_text(textwrap.dedent("""
        - name: Refuse when asked to
          ansible.builtin.fail:
            msg: backup failed
          when: fail_cleanup | default(false) | bool
    """))
    return tmp_path


def controller(tree: pathlib.Path, api: FakeApi, **changes: Any) -> reconciling.Controller:
    watch = watches.Watch(
        group='otus.homework', version='v1', kind='MySQL',
        target=watches.Runnable(type='role', path=tree / 'roles' / 'db'),
        vars={}, reconcile_period=0.0, manage_status=True,
        finalizer=watches.Finalizer(
            name='otus.homework/finalizer',
            target=watches.Runnable(type='role', path=tree / 'roles' / 'cleanup'), vars={}),
        snake_case_parameters=True, mark_unsafe=True, max_concurrent_reconciles=1,
        max_runner_artifacts=2, match_labels={}, roles_path=(tree / 'roles',),
    )
    return reconciling.Controller(
        watch=dataclasses.replace(watch, **changes),
        settings=runner.RunSettings(workdir=tree / 'work'),
        throttle=concurrency.Throttle(2), api=api)


def make_obj(**spec: Any) -> dict[str, Any]:
    return {'apiVersion': 'otus.homework/v1', 'kind': 'MySQL',
            'metadata': {'name': 'db1', 'namespace': 'apps', 'generation': 1},
            'spec': {'port': 3306, **spec}}


def reconcile(ctl: reconciling.Controller, *, finalizing: bool = False) -> Any:
    return asyncio.run(reconciling.reconcile(ctl, resource=RESOURCE, namespace='apps',
                                             name='db1', finalizing=finalizing))


def test_first_reconcile_then_an_unchanged_one_writes_nothing(tree: pathlib.Path) -> None:
    api = FakeApi(make_obj())
    ctl = controller(tree, api)
    outcome = reconcile(ctl)
    assert outcome.successful
    assert len(api.patches) == 2  # Running, then the result
    assert api.patches[0]['conditions'][0]['reason'] == 'Running'
    assert api.obj is not None
    st = api.obj['status']
    assert st['endpoint'] == 'db1:3306'  # custom stats reach .status
    assert st['observedGeneration'] == 1
    assert {c['type']: c['status'] for c in st['conditions']} == {
        'Running': 'True', 'Successful': 'True', 'Failure': 'False'}

    assert reconcile(ctl).successful
    assert len(api.patches) == 2  # the unchanged reconcile made no write


def test_each_run_logs_its_summary_as_a_sentence_and_as_fields(
        tree: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level('INFO', logger='ansible_kopf.reconciling')
    ctl = controller(tree, FakeApi(make_obj(failCleanup=True)))
    outcome = reconcile(ctl)
    failed = reconcile(ctl, finalizing=True)
    first, second = summary.parse_all(caplog.text)
    assert (first.action, first.kind, first.namespace, first.name, first.status) == (
        'reconcile', ctl.watch.gvk, 'apps', 'db1', 'successful')
    assert first.counts == outcome.counts.as_dict()
    assert first.seconds == round(outcome.duration, 3)
    assert (second.action, second.status) == ('finalize', failed.status)
    assert second.finished_at >= first.finished_at
    assert first.sentence() in caplog.text and second.sentence() in caplog.text


def test_spec_change_marks_running_again(tree: pathlib.Path) -> None:
    api = FakeApi(make_obj())
    ctl = controller(tree, api)
    reconcile(ctl)
    assert api.obj is not None
    api.obj['spec']['port'] = 3307
    api.obj['metadata']['generation'] = 2
    reconcile(ctl)
    assert len(api.patches) == 4
    assert api.patches[2]['conditions'][0]['reason'] == 'Running'
    assert api.obj['status']['endpoint'] == 'db1:3307'
    assert api.obj['status']['observedGeneration'] == 2


def test_failure_is_reported_and_retries_of_it_write_nothing(tree: pathlib.Path) -> None:
    api = FakeApi(make_obj(failPlease=True))
    ctl = controller(tree, api)
    outcome = reconcile(ctl)
    assert not outcome.successful
    assert outcome.failed_task == 'Fail when asked to'
    assert api.obj is not None
    failure = {c['type']: c for c in api.obj['status']['conditions']}['Failure']
    assert (failure['status'], failure['message']) == ('True', 'asked to fail for db1')
    writes = len(api.patches)
    assert not reconcile(ctl).successful
    assert len(api.patches) == writes


def test_a_successful_run_is_requeued_after_the_reconcile_period(tree: pathlib.Path) -> None:
    """As in the SDK: the watches entry's reconcilePeriod, or the object's reconcile-period
    annotation before it, is the delay of the next run after a successful one; a failed run
    is retried with backoff instead, and a finalization is never requeued."""
    api = FakeApi(make_obj())
    assert reconcile(controller(tree, api)).requeue_after is None  # no period: no requeue
    ctl = controller(tree, api, reconcile_period=90.0)
    outcome = reconcile(ctl)
    assert (outcome.requeue_after, outcome.periodic) == (90.0, True)
    assert api.obj is not None
    api.obj['metadata']['annotations'] = {constants.ANNOTATION_RECONCILE_PERIOD: '2s'}
    assert (reconcile(ctl).requeue_after, reconcile(ctl).periodic) == (2.0, True)
    assert reconcile(ctl, finalizing=True).requeue_after is None
    api.obj['spec']['failPlease'] = True
    assert reconcile(ctl).requeue_after is None


def test_without_manage_status_nothing_is_written(tree: pathlib.Path) -> None:
    api = FakeApi(make_obj())
    assert reconcile(controller(tree, api, manage_status=False)).successful
    assert api.patches == []
    assert api.obj is not None
    assert 'status' not in api.obj


def test_finalization_runs_the_finalizer_role(tree: pathlib.Path) -> None:
    api = FakeApi(make_obj(failCleanup=True))
    ctl = controller(tree, api)
    outcome = reconcile(ctl, finalizing=True)
    assert not outcome.successful
    assert outcome.message == 'backup failed'  # the cleanup role ran, not the main one
    assert api.obj is not None
    assert 'backup failed' in str(api.obj['status']['conditions'])
    # A successful finalization writes no final status: the object is about to go.
    api.obj['spec']['failCleanup'] = False
    writes = len(api.patches)
    assert reconcile(ctl, finalizing=True).successful
    assert len(api.patches) == writes


def test_a_vanished_object_is_not_run(tree: pathlib.Path) -> None:
    api = FakeApi(None)
    assert reconcile(controller(tree, api)) is None
    assert api.patches == []
    assert not (tree / 'work' / 'otus.homework').exists()


def test_an_object_relabelled_out_of_the_selector_is_not_run(tree: pathlib.Path) -> None:
    """A requested run (a period, a dependent's change) of an object whose labels no longer
    match the entry's selector runs nothing, and so requeues nothing."""
    obj = make_obj()
    obj['metadata']['labels'] = {'tier': 'web'}
    api = FakeApi(obj)
    by_labels = controller(tree, api, match_labels={'tier': 'db'}, reconcile_period=60.0)
    assert reconcile(by_labels) is None
    by_expression = controller(tree, api, match_expressions=(
        watches.Requirement('tier', 'In', frozenset({'db'})),))
    assert reconcile(by_expression) is None
    assert api.patches == []
    api.obj['metadata']['labels'] = {'tier': 'db'}
    assert reconcile(by_labels).requeue_after == 60.0


def test_a_deleting_object_is_only_finalized(tree: pathlib.Path) -> None:
    obj = make_obj()
    obj['metadata']['deletionTimestamp'] = '2026-01-01T00:00:00Z'
    api = FakeApi(obj)
    ctl = controller(tree, api)
    assert reconcile(ctl) is None  # e.g. a periodic run that raced with the deletion
    assert api.patches == []
    assert reconcile(ctl, finalizing=True).successful
