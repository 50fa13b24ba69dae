"""Which fields a write sets, from each body the API server takes, and the digest on them."""

from __future__ import annotations

import json

from ansible_kopf.kube import written


def test_a_created_object_writes_its_leaves_but_lists_whole_and_no_bookkeeping() -> None:
    body = {'apiVersion': 'apps/v1', 'kind': 'Deployment',
            'metadata': {'name': 'web', 'resourceVersion': '7', 'labels': {'app': 'web'}},
            'spec': {'replicas': 1, 'template': {'spec': {'containers': [{'name': 'c'}]}}},
            'status': {'replicas': 1}}
    assert written.paths_of(json.dumps(body).encode(), 'application/json') == {
        ('metadata', 'name'), ('metadata', 'labels', 'app'),
        ('spec', 'replicas'), ('spec', 'template', 'spec', 'containers')}


def test_a_strategic_merge_patch_leaves_out_its_directives() -> None:
    body = {'spec': {'template': {'spec': {'$setElementOrder/containers': [{'name': 'c'}],
                                           'containers': [{'name': 'c', 'image': 'x'}]}}},
            'metadata': {'annotations': {'a': None}}}
    assert written.paths_of(json.dumps(body).encode(),
                            'application/strategic-merge-patch+json') == {
        ('spec', 'template', 'spec', 'containers'), ('metadata', 'annotations', 'a')}


def test_a_json_patch_writes_the_paths_of_its_operations_up_to_a_list() -> None:
    body = [{'op': 'replace', 'path': '/spec/replicas', 'value': 2},
            {'op': 'add', 'path': '/metadata/annotations/a~1b', 'value': 'x'},
            {'op': 'remove', 'path': '/spec/template/spec/containers/0/env/1'},
            {'op': 'move', 'from': '/data/old', 'path': '/data/new'}]
    assert written.paths_of(json.dumps(body).encode(), written.JSON_PATCH) == {
        ('spec', 'replicas'), ('metadata', 'annotations', 'a/b'),
        ('spec', 'template', 'spec', 'containers'), ('data', 'old'), ('data', 'new')}


def test_a_server_side_apply_body_is_yaml() -> None:
    body = b"apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n"
    assert written.paths_of(body, written.APPLY_PATCH) == {
        ('metadata', 'name'), ('spec', 'ports')}


def test_an_unreadable_body_writes_unknown_fields() -> None:
    assert written.paths_of(b'{not json', 'application/json') is None
    assert written.paths_of(b'"text"', 'application/merge-patch+json') is None
    assert written.paths_of(b'[{"op": "add"}]', written.JSON_PATCH) is None


def test_the_digest_follows_the_written_fields_and_the_owners_only() -> None:
    paths = frozenset({('spec', 'replicas'), ('metadata', 'labels', 'app')})
    obj = {'metadata': {'labels': {'app': 'web'}, 'annotations': {}}, 'spec': {'replicas': 1}}
    before = written.digest(obj, paths)
    controller = json.loads(json.dumps(obj))
    controller['metadata']['annotations']['deployment.kubernetes.io/revision'] = '1'
    controller['spec']['paused'] = False
    assert written.digest(controller, paths) == before
    for change in ({'spec': {'replicas': 0}}, {'metadata': {'labels': {}}},
                   {'metadata': {'ownerReferences': []}},
                   {'metadata': {'deletionTimestamp': '2026-01-01T00:00:00Z'}}):
        edited = json.loads(json.dumps(obj))
        for key, value in change.items():
            edited[key].update(value)
        assert written.digest(edited, paths) != before, change
    assert written.digest(obj, paths | {('spec', 'paused')}) != before
