"""sdk.extravars: the variables a run gets for one object, as the SDK builds them."""
import dataclasses
import json
import pathlib
from typing import Any

import pytest

from ansible_kopf.sdk import extravars, watches

ROLE = watches.Runnable(type='role', path=pathlib.Path('/roles/mysql'))
WATCH = watches.Watch(
    group='otus.homework', version='v1', kind='MySQL', target=ROLE,
    vars={'mysql_image': 'mysql:8.0', 'templated': '{{ mysql_image }}'},
    reconcile_period=0.0, manage_status=True, finalizer=None,
    snake_case_parameters=True, mark_unsafe=False,
    max_concurrent_reconciles=1, max_runner_artifacts=20,
    match_labels={}, roles_path=(),
)
INJECTION = "{{ lookup('pipe', 'id') }}"


def make_body() -> dict[str, Any]:
    return {
        'apiVersion': 'otus.homework/v1',
        'kind': 'MySQL',
        'metadata': {
            'name': 'db1',
            'namespace': 'apps',
            'generation': 3,
            'labels': {'app': 'db'},
            'annotations': {
                'kubectl.kubernetes.io/last-applied-configuration': '{"spec":{"password":"s3"}}',
                'ansible-kopf/last-handled-configuration': '{"spec":{}}',
                'team': 'dba',
            },
            'managedFields': [{'manager': 'kubectl', 'fieldsV1': {'f:spec': {}}}],
        },
        'spec': {
            'storageSize': '1Gi',
            'passwordSecretRef': {'secretName': 'db1-pass', 'keyName': 'rootPassword'},
            'serverID': 7,
            'database': INJECTION,
            'users': [{'userName': 'app', 'hosts': ['%', INJECTION]}],
            'enabled': True,
        },
        'status': {'conditions': [{'type': 'Successful', 'status': 'True'}]},
    }


def test_spec_keys_become_snake_case_top_level_variables() -> None:
    params = extravars.build(make_body(), WATCH, finalizing=False)
    assert params['storage_size'] == '1Gi'
    assert params['password_secret_ref'] == {'secret_name': 'db1-pass', 'key_name': 'rootPassword'}
    assert params['server_id'] == 7
    assert params['users'] == [{'user_name': 'app', 'hosts': ['%', INJECTION]}]
    assert params['enabled'] is True
    assert 'storageSize' not in params


def test_without_snake_case_the_spec_keys_are_kept() -> None:
    watch = dataclasses.replace(WATCH, snake_case_parameters=False)
    params = extravars.build(make_body(), watch, finalizing=False)
    assert params['storageSize'] == '1Gi'
    assert params['passwordSecretRef'] == {'secretName': 'db1-pass', 'keyName': 'rootPassword'}
    assert 'storage_size' not in params


def test_meta_and_the_whole_object_under_sdk_names() -> None:
    body = make_body()
    params = extravars.build(body, WATCH, finalizing=False)
    assert params['ansible_operator_meta'] == {'name': 'db1', 'namespace': 'apps'}
    obj = params['_otus_homework_mysql']
    assert obj['metadata']['name'] == 'db1'
    assert obj['status'] == body['status']
    # The raw spec keeps the original camelCase keys.
    assert params['_otus_homework_mysql_spec'] == body['spec']


@pytest.mark.parametrize(('group', 'kind', 'key'), [
    ('otus.homework', 'MySQL', '_otus_homework_mysql'),
    ('cert-manager.k8s.io', 'Certificate', '_cert_manager_k8s_io_certificate'),
    ('', 'ConfigMap', '__configmap'),
])
def test_object_key(group: str, kind: str, key: str) -> None:
    assert extravars.object_key(group, kind) == key


def test_managed_fields_last_applied_and_own_annotations_are_stripped() -> None:
    body = make_body()
    params = extravars.build(body, WATCH, finalizing=False)
    metadata = params['_otus_homework_mysql']['metadata']
    assert 'managedFields' not in metadata
    assert metadata['annotations'] == {'team': 'dba'}
    assert 's3' not in extravars.dumps(params)
    # The caller's body is not modified.
    assert 'managedFields' in body['metadata']
    assert len(body['metadata']['annotations']) == 3


def test_annotations_key_disappears_when_nothing_is_left() -> None:
    body = make_body()
    body['metadata']['annotations'] = {'kubectl.kubernetes.io/last-applied-configuration': '{}'}
    params = extravars.build(body, WATCH, finalizing=False)
    assert 'annotations' not in params['_otus_homework_mysql']['metadata']


def test_watch_vars_override_spec_and_finalizer_vars_override_both() -> None:
    finalizer = watches.Finalizer(name='x/y', target=ROLE, vars={'mysql_image': 'gone',
                                                                  'state': 'absent'})
    watch = dataclasses.replace(WATCH, finalizer=finalizer)
    body = make_body()
    body['spec']['mysqlImage'] = 'from-spec'
    assert extravars.build(body, watch, finalizing=False)['mysql_image'] == 'mysql:8.0'
    params = extravars.build(body, watch, finalizing=True)
    assert params['mysql_image'] == 'gone'
    assert params['state'] == 'absent'


def test_missing_or_odd_spec_gives_empty_spec() -> None:
    body = make_body()
    del body['spec']
    params = extravars.build(body, WATCH, finalizing=False)
    assert params['_otus_homework_mysql_spec'] == {}
    body['spec'] = 'not-a-mapping'
    assert extravars.build(body, WATCH, finalizing=False)['_otus_homework_mysql_spec'] == {}


def test_unsafe_marking_wraps_every_string_from_the_object_at_any_depth() -> None:
    watch = dataclasses.replace(WATCH, mark_unsafe=True)
    params = extravars.build(make_body(), watch, finalizing=False)
    unsafe = extravars.UNSAFE_KEY
    assert params['database'] == {unsafe: INJECTION}
    assert params['storage_size'] == {unsafe: '1Gi'}
    assert params['users'] == [{'user_name': {unsafe: 'app'},
                                'hosts': [{unsafe: '%'}, {unsafe: INJECTION}]}]
    assert params['password_secret_ref']['secret_name'] == {unsafe: 'db1-pass'}
    # Non-strings are left alone.
    assert params['server_id'] == 7
    assert params['enabled'] is True
    # Meta, the whole object (metadata, status) and the raw spec too.
    assert params['ansible_operator_meta'] == {'name': {unsafe: 'db1'},
                                               'namespace': {unsafe: 'apps'}}
    obj = params['_otus_homework_mysql']
    assert obj['metadata']['labels'] == {'app': {unsafe: 'db'}}
    assert obj['metadata']['generation'] == 3
    assert obj['status']['conditions'][0]['status'] == {unsafe: 'True'}
    assert obj['kind'] == {unsafe: 'MySQL'}
    assert params['_otus_homework_mysql_spec']['database'] == {unsafe: INJECTION}
    # The operator author's vars are trusted.
    assert params['templated'] == '{{ mysql_image }}'
    assert params['mysql_image'] == 'mysql:8.0'


def test_no_string_from_the_object_escapes_marking() -> None:
    watch = dataclasses.replace(WATCH, mark_unsafe=True, vars={})
    params = extravars.build(make_body(), watch, finalizing=False)

    def strings(value: Any) -> list[str]:
        if isinstance(value, dict):
            if set(value) == {extravars.UNSAFE_KEY}:
                return []
            return [s for item in value.values() for s in strings(item)]
        if isinstance(value, list):
            return [s for item in value for s in strings(item)]
        return [value] if isinstance(value, str) else []

    assert strings(params) == []


def test_dumps_is_json_that_ansible_reads() -> None:
    watch = dataclasses.replace(WATCH, mark_unsafe=True)
    params = extravars.build(make_body(), watch, finalizing=False)
    assert json.loads(extravars.dumps(params)) == params
