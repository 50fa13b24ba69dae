"""What a dependent's change is, and whom it is told to (the SDK's DependentPredicate and
owner mapping); the watches themselves against a real API server: test_dependents."""

from __future__ import annotations

from ansible_kopf import dependents


def deployment(**metadata: object) -> dict[str, object]:
    return {'apiVersion': 'apps/v1', 'kind': 'Deployment',
            'metadata': {'name': 'web', 'namespace': 'ns', 'resourceVersion': '1', **metadata},
            'spec': {'replicas': 1}, 'status': {'readyReplicas': 0}}


def test_status_and_bookkeeping_are_not_a_change() -> None:
    before = deployment()
    after = deployment(resourceVersion='2', managedFields=[{'manager': 'kcm'}])
    after['status'] = {'readyReplicas': 1}
    assert dependents.fingerprint(before) == dependents.fingerprint(after)


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
