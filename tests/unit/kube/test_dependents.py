"""What a dependent's change is, and whom it is told to (the SDK's DependentPredicate and
owner mapping); the watches themselves against a real API server: test_dependents."""

from __future__ import annotations

from ansible_kopf.kube import dependents


def deployment(**metadata: object) -> dict[str, object]:
    return {'apiVersion': 'apps/v1', 'kind': 'Deployment',
            'metadata': {'name': 'web', 'namespace': 'ns', 'resourceVersion': '1', **metadata},
            'spec': {'replicas': 1}, 'status': {'readyReplicas': 0}}


def test_status_and_bookkeeping_are_not_a_change() -> None:
    before = deployment()
    after = deployment(resourceVersion='2', managedFields=[{'manager': 'kcm'}])
    after['status'] = {'readyReplicas': 1}
    assert dependents.fingerprint(before) == dependents.fingerprint(after)


def test_an_item_of_a_list_is_the_same_object_as_its_watch_event() -> None:
    """A list's items carry no kind or apiVersion; the watch's events do."""
    listed = deployment()
    del listed['kind'], listed['apiVersion']
    assert dependents.fingerprint(listed) == dependents.fingerprint(deployment())


def test_spec_labels_and_annotations_are_a_change() -> None:
    before = deployment()
    assert dependents.fingerprint(before) != dependents.fingerprint(deployment(labels={'a': 'b'}))
    changed = deployment()
    changed['spec'] = {'replicas': 0}
    assert dependents.fingerprint(before) != dependents.fingerprint(changed)


def test_the_controller_reference_is_the_owner() -> None:
    obj = deployment(ownerReferences=[
        {'apiVersion': 'v1', 'kind': 'ConfigMap', 'name': 'not-controller', 'uid': 'a'},
        {'apiVersion': 'otus.homework/v1', 'kind': 'MySQL', 'name': 'db', 'uid': 'b',
         'controller': True}])
    assert dependents.owners(obj) == [dependents.OwnerKey('otus.homework', 'MySQL', 'ns', 'db')]


def test_the_sdk_annotations_name_the_owner_of_a_cluster_scoped_object() -> None:
    obj = {'metadata': {'name': 'pv', 'annotations': {
        'operator-sdk/primary-resource': 'ns/db',
        'operator-sdk/primary-resource-type': 'MySQL.otus.homework'}}}
    assert dependents.owners(obj) == [dependents.OwnerKey('otus.homework', 'MySQL', 'ns', 'db')]
    core = {'metadata': {'name': 'x', 'annotations': {
        'operator-sdk/primary-resource': 'ns/c',
        'operator-sdk/primary-resource-type': 'ConfigMap.'}}}
    assert dependents.owners(core) == [dependents.OwnerKey('', 'ConfigMap', 'ns', 'c')]


def test_an_object_without_an_owner_tells_nobody() -> None:
    assert dependents.owners(deployment()) == []


def test_a_job_of_a_cronjob_tells_the_controller_and_the_annotated_owner() -> None:
    job = {'metadata': {'name': 'db-bk-1', 'namespace': 'ns', 'ownerReferences': [
        {'apiVersion': 'batch/v1', 'kind': 'CronJob', 'name': 'db-bk', 'uid': 'c', 'controller': True}],
        'annotations': {'operator-sdk/primary-resource': 'ns/db',
                        'operator-sdk/primary-resource-type': 'MySQL.otus.homework'}}}
    assert dependents.owners(job) == [dependents.OwnerKey('batch', 'CronJob', 'ns', 'db-bk'),
                                      dependents.OwnerKey('otus.homework', 'MySQL', 'ns', 'db')]


def test_a_status_change_is_kept_apart_from_a_change() -> None:
    owner = (dependents.OwnerKey('otus.homework', 'MySQL', 'ns', 'db'),)
    before = dependents.Seen.of(deployment(), owner)
    ready = deployment(resourceVersion='2')
    ready['status'] = {'readyReplicas': 1}
    after = dependents.Seen.of(ready, owner)
    assert (before.spec, before.status != after.status) == (after.spec, True)
    assert after.change_from(before) == 'status'
    edited = dependents.Seen.of(deployment(labels={'a': 'b'}), owner)
    assert (edited.spec != before.spec, edited.status) == (True, before.status)
    assert edited.change_from(before) == 'spec'
    assert dependents.Seen.of(deployment(resourceVersion='3'), owner).change_from(before) is None


def test_a_change_to_no_field_a_run_wrote_is_none() -> None:
    """The Deployment controller's revision annotation on a Deployment a run created is no
    change; an edit of a written field, or of an unknown object's, is."""
    owner = (dependents.OwnerKey('otus.homework', 'MySQL', 'ns', 'db'),)
    paths = frozenset({('spec', 'replicas'), ('metadata', 'name')})
    before = dependents.Seen.of(deployment(), owner, paths)
    revised = deployment(resourceVersion='2', annotations={'deployment.kubernetes.io/revision': '1'})
    assert dependents.Seen.of(revised, owner, paths).change_from(before) is None
    assert dependents.Seen.of(revised, owner).change_from(dependents.Seen.of(deployment(), owner)) == 'spec'
    revised['status'] = {'readyReplicas': 1}
    assert dependents.Seen.of(revised, owner, paths).change_from(before) == 'status'
    scaled = deployment(resourceVersion='3')
    scaled['spec'] = {'replicas': 3}
    assert dependents.Seen.of(scaled, owner, paths).change_from(before) == 'spec'
    # the same change, taken on more fields than before (a run wrote since): a change
    more = paths | {('spec', 'paused')}
    revised = deployment(resourceVersion='4', annotations={'deployment.kubernetes.io/revision': '1'})
    assert dependents.Seen.of(revised, owner, more).change_from(before) == 'spec'


def test_the_written_fields_add_up_per_object_until_a_create_or_an_unknown_write() -> None:
    watcher = dependents.Watcher(upstream=None, namespaces=(), changed=lambda _c: None)  # type: ignore[arg-type]
    deployments = dependents.Dependent('apps', 'v1', 'deployments', namespaced=True)
    obj = deployment()
    watcher.wrote(deployments, 'ns', 'web', frozenset({('spec', 'replicas')}), replace=True)
    watcher.wrote(deployments, 'ns', 'web', frozenset({('metadata', 'labels', 'a')}), replace=False)
    assert watcher._paths(deployments, obj) == {('spec', 'replicas'), ('metadata', 'labels', 'a')}
    watcher.wrote(deployments, 'ns', 'web', frozenset({('spec', 'paused')}), replace=True)
    assert watcher._paths(deployments, obj) == {('spec', 'paused')}
    watcher.wrote(deployments, 'ns', 'other', frozenset({('spec', 'paused')}), replace=True)
    assert watcher._paths(deployments, obj) is watcher._paths(deployments, deployment(name='other'))
    watcher.wrote(deployments, 'ns', 'web', None, replace=False)
    assert watcher._paths(deployments, obj) is None
