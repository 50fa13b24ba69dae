"""The proxy's pure parts: which object a path addresses, what a create gets injected, and
whose an object is; and the API server's warnings it logs, against a stand-in API server
(the proxy against a real API server: tests/integration/test_dependents)."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import pathlib
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web

from ansible_kopf.kube import client, proxy, written
from ansible_kopf.sdk import watches


def watch(**changes: object) -> watches.Watch:
    fields: dict[str, object] = {
        'group': 'otus.homework', 'version': 'v1', 'kind': 'MySQL',
        'target': watches.Runnable(type='role', path=pathlib.Path('/roles/mysql')),
        'vars': {}, 'reconcile_period': 0.0, 'manage_status': True, 'finalizer': None,
        'snake_case_parameters': True, 'mark_unsafe': True, 'max_concurrent_reconciles': 1,
        'max_runner_artifacts': 1, 'match_labels': {}, 'roles_path': (),
    }
    return watches.Watch(**{**fields, **changes})  # type: ignore[arg-type]


OWNER = proxy.Owner(api_version='otus.homework/v1', kind='MySQL', namespace='ns', name='db',
                    uid='u-1', watch=watch())


@pytest.mark.parametrize(('path', 'expected'), [
    ('/api/v1/namespaces/ns/configmaps', ('', 'v1', 'configmaps', True, 'ns', None, None)),
    ('/apis/apps/v1/namespaces/ns/deployments/web/status',
     ('apps', 'v1', 'deployments', True, 'ns', 'web', 'status')),
    ('/api/v1/persistentvolumes/pv-1', ('', 'v1', 'persistentvolumes', False, None, 'pv-1', None)),
    ('/api/v1/namespaces/ns', ('', 'v1', 'namespaces', False, None, 'ns', None)),
])
def test_a_path_names_the_resource_scope_and_object(path: str, expected: tuple[object, ...]) -> None:
    target = proxy.RequestPath.parse(path)
    assert target is not None
    dependent = target.dependent
    assert (dependent.group, dependent.version, dependent.plural, dependent.namespaced,
            target.namespace, target.name, target.subresource) == expected


@pytest.mark.parametrize('path', ['/api', '/apis/apps', '/version', '/openapi/v2'])
def test_discovery_paths_address_no_object(path: str) -> None:
    assert proxy.RequestPath.parse(path) is None


def test_a_create_in_the_owners_namespace_gets_a_controller_reference() -> None:
    target = proxy.RequestPath.parse('/api/v1/namespaces/ns/configmaps')
    assert target is not None
    obj = proxy.inject(OWNER, target, {'kind': 'ConfigMap', 'metadata': {'name': 'c'}})
    assert obj['metadata']['ownerReferences'] == [{
        'apiVersion': 'otus.homework/v1', 'kind': 'MySQL', 'name': 'db', 'uid': 'u-1',
        'controller': True, 'blockOwnerDeletion': True}]
    assert OWNER.controls(obj)


def test_an_object_with_a_controller_keeps_it() -> None:
    target = proxy.RequestPath.parse('/api/v1/namespaces/ns/configmaps')
    assert target is not None
    other = {'apiVersion': 'v1', 'kind': 'Other', 'name': 'o', 'uid': 'u-2', 'controller': True}
    obj = proxy.inject(OWNER, target, {'kind': 'ConfigMap',
                                       'metadata': {'name': 'c', 'ownerReferences': [other]}})
    assert obj['metadata']['ownerReferences'] == [other]
    assert not OWNER.controls(obj)


@pytest.mark.parametrize('path', ['/api/v1/persistentvolumes', '/api/v1/namespaces/other/configmaps'])
def test_cluster_scoped_and_other_namespace_creates_get_the_sdk_annotations(path: str) -> None:
    target = proxy.RequestPath.parse(path)
    assert target is not None
    obj = proxy.inject(OWNER, target, {'kind': 'X', 'metadata': {'name': 'x'}})
    assert 'ownerReferences' not in obj['metadata']
    assert obj['metadata']['annotations'] == {
        'operator-sdk/primary-resource': 'ns/db',
        'operator-sdk/primary-resource-type': 'MySQL.otus.homework'}
    assert OWNER.controls(obj)


def test_a_runs_kubeconfig_points_at_the_proxy_with_its_token() -> None:
    config = yaml.safe_load(proxy.kubeconfig(port=4321, token='t0k'))
    assert config['clusters'][0]['cluster']['server'] == 'http://127.0.0.1:4321'
    assert config['users'][0]['user'] == {'token': 't0k'}


def test_a_blacklisted_kind_is_never_reported_as_a_dependent(tmp_path: pathlib.Path) -> None:
    learned: list[proxy.Dependent] = []
    runs = proxy.Proxy(upstream=None, directory=tmp_path,  # type: ignore[arg-type]
                       learned=lambda _owner, dependent: learned.append(dependent))
    owner = proxy.Owner(api_version='otus.homework/v1', kind='MySQL', namespace='ns', name='db',
                        uid='u-1', watch=watch(blacklist=frozenset({('', 'v1', 'ConfigMap')})))
    configmaps = proxy.RequestPath.parse('/api/v1/namespaces/ns/configmaps')
    secrets = proxy.RequestPath.parse('/api/v1/namespaces/ns/secrets')
    assert configmaps is not None and secrets is not None
    configmap = {"kind": "ConfigMap", "metadata": {"name": "c"}}
    _, created, _ = runs._creating(owner, configmaps, json.dumps(configmap).encode(), configmap)
    assert created is None
    secret = {"kind": "Secret", "metadata": {"name": "s"}}
    _, created, _ = runs._creating(owner, secrets, json.dumps(secret).encode(), secret)
    assert created == secrets.dependent
    owned = {'metadata': {'ownerReferences': [owner.reference()]}}
    runs._inspect(owner, configmaps.dependent,
                  json.dumps({"kind": "ConfigMapList", "items": [owned]}).encode())
    runs._inspect(owner, secrets.dependent,
                  json.dumps({"kind": "SecretList", "items": [owned]}).encode())
    assert learned == [secrets.dependent]


def test_a_runs_writes_are_told_with_their_fields_before_they_go_on(tmp_path: pathlib.Path) -> None:
    told: list[tuple[object, ...]] = []
    runs = proxy.Proxy(upstream=None, directory=tmp_path,  # type: ignore[arg-type]
                       learned=lambda _owner, _dependent: None,
                       writing=lambda *args: told.append(args))
    services = proxy.RequestPath.parse('/api/v1/namespaces/ns/services')
    one = proxy.RequestPath.parse('/api/v1/namespaces/ns/services/s')
    assert services is not None and one is not None
    for method, target, body, content_type in [
            ('POST', services, b'{"kind": "Service", "metadata": {"name": "s"}}', 'application/json'),
            ('PATCH', one, b'{"spec": {"type": "NodePort"}}', 'application/merge-patch+json'),
            ('PATCH', one, b'not json', 'application/merge-patch+json'),
            ('DELETE', one, b'{}', 'application/json')]:
        runs._tell_writing(method, target, written.decode(body, content_type), content_type)
    assert told == [
        (services.dependent, 'ns', 's', {('metadata', 'name')}, True),
        (one.dependent, 'ns', 's', {('spec', 'type')}, False),
        (one.dependent, 'ns', 's', None, False)]


@pytest.mark.parametrize(('values', 'texts'), [
    (['299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"'],
     ['v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice']),
    # a comma inside the text (kubernetes.core splits the header there and loses it)
    (['299 - "batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in v1.25+; use batch/v1 CronJob"'],
     ['batch/v1beta1 CronJob is deprecated in v1.21+, unavailable in v1.25+; use batch/v1 CronJob']),
    # escaped quotes; two warnings in one value (headers joined by a comma)
    (['299 - "unknown field \\"spec.foo\\"", 299 - "duplicate field \\"replicas\\""'],
     ['unknown field "spec.foo"', 'duplicate field "replicas"']),
    (['not quoted at all'], ['not quoted at all']),
    ([], []),
])
def test_warning_headers_are_read_as_their_texts(values: list[str], texts: list[str]) -> None:
    assert proxy.server_warnings(values) == texts


def test_the_api_servers_warnings_to_a_run_are_logged_and_the_response_goes_back(
        tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    warnings = ['299 - "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice"',
                '299 - "unknown field \\"spec.foo\\""']

    async def api_server(_request: web.Request) -> web.Response:
        response = web.json_response({'kind': 'EndpointsList', 'items': []})
        for value in warnings:  # one header each, as the API server sends them
            response.headers.add('Warning', value)
        return response

    async def go() -> tuple[int, dict[str, Any], list[str]]:
        app = web.Application()
        app.router.add_get('/api/v1/namespaces/ns/endpoints', api_server)
        upstream = web.AppRunner(app)
        await upstream.setup()
        site = web.TCPSite(upstream, '127.0.0.1', 0)
        await site.start()
        port = upstream.addresses[0][1]
        runs = proxy.Proxy(client.Upstream(host=f"http://127.0.0.1:{port}", ssl=False,
                                            authorization=lambda: None),
                           tmp_path / 'proxy', learned=lambda _owner, _dependent: None)
        await runs.start()
        try:
            with runs.run(OWNER) as path:
                token = yaml.safe_load(pathlib.Path(path).read_text())['users'][0]['user']['token']
                async with aiohttp.ClientSession() as session, session.get(
                        f"http://127.0.0.1:{runs.port}/api/v1/namespaces/ns/endpoints",
                        headers={'Authorization': f"Bearer {token}"}) as response:
                    return response.status, await response.json(), response.headers.getall('Warning', [])
        finally:
            await runs.close()
            await upstream.cleanup()

    with caplog.at_level(logging.WARNING, logger='ansible_kopf.kube.proxy'):
        status, body, passed_on = asyncio.run(go())
    assert (status, body) == (200, {'kind': 'EndpointsList', 'items': []})
    assert passed_on == warnings, "the run gets every Warning header, not the last one"
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        '[otus.homework/v1/MySQL ns/db] API server warning on GET /api/v1/namespaces/ns/endpoints: '
        'v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice',
        '[otus.homework/v1/MySQL ns/db] API server warning on GET /api/v1/namespaces/ns/endpoints: '
        'unknown field "spec.foo"']


def test_a_large_response_reaches_the_run_uncompressed(tmp_path: pathlib.Path) -> None:
    """The API server gzips a response above 128 KB when the request accepts it; what reaches
    the run must be the JSON itself (a kubernetes.core lookup read gzip bytes as text)."""
    items = [{'metadata': {'name': f'job-{i}'}, 'spec': {'script': 'x' * 1024}} for i in range(200)]

    async def api_server(request: web.Request) -> web.Response:
        body = json.dumps({'kind': 'JobList', 'items': items}).encode()
        if 'gzip' in request.headers.get('Accept-Encoding', ''):
            return web.Response(body=gzip.compress(body), content_type='application/json',
                                 headers={'Content-Encoding': 'gzip'})
        return web.Response(body=body, content_type='application/json')

    async def go() -> bytes:
        app = web.Application()
        app.router.add_get('/apis/batch/v1/namespaces/ns/jobs', api_server)
        upstream = web.AppRunner(app)
        await upstream.setup()
        site = web.TCPSite(upstream, '127.0.0.1', 0)
        await site.start()
        port = upstream.addresses[0][1]
        runs = proxy.Proxy(client.Upstream(host=f"http://127.0.0.1:{port}", ssl=False,
                                            authorization=lambda: None),
                           tmp_path / 'proxy', learned=lambda _owner, _dependent: None)
        await runs.start()
        try:
            with runs.run(OWNER) as path:
                token = yaml.safe_load(pathlib.Path(path).read_text())['users'][0]['user']['token']
                async with aiohttp.ClientSession(auto_decompress=False) as session, session.get(
                        f"http://127.0.0.1:{runs.port}/apis/batch/v1/namespaces/ns/jobs",
                        headers={'Authorization': f"Bearer {token}", 'Accept-Encoding': 'gzip'}) as response:
                    return await response.read()
        finally:
            await runs.close()
            await upstream.cleanup()

    assert json.loads(asyncio.run(go()))['items'] == items


def test_a_write_annotated_for_a_watched_kind_makes_it_follow_the_resource(tmp_path: pathlib.Path) -> None:
    """A run of one kind (a backup record's) annotates its object for another kind's object
    (its instance): the instance's kind follows that resource from then on."""
    learned: list[tuple[str, proxy.Dependent]] = []
    runs = proxy.Proxy(upstream=None, directory=tmp_path,  # type: ignore[arg-type]
                       learned=lambda owner, dependent: learned.append((owner.kind, dependent)),
                       annotated={'MySQL.otus.homework': watch(),
                                  'Quiet.otus.homework': watch(kind='Quiet', watch_dependents=False)})
    record = proxy.RequestPath.parse('/apis/otus.homework/v1/namespaces/ns/mysqlbackups/r')
    assert record is not None
    runs._annotated_write(record, {'metadata': {'annotations': {
        proxy.PRIMARY_RESOURCE: 'ns/db', proxy.PRIMARY_RESOURCE_TYPE: 'MySQL.otus.homework'}}})
    runs._annotated_write(record, {'metadata': {'annotations': {  # a kind that follows nothing
        proxy.PRIMARY_RESOURCE: 'ns/q', proxy.PRIMARY_RESOURCE_TYPE: 'Quiet.otus.homework'}}})
    runs._annotated_write(record, {'metadata': {'annotations': {  # no watched kind
        proxy.PRIMARY_RESOURCE: 'ns/x', proxy.PRIMARY_RESOURCE_TYPE: 'Other.example.com'}}})
    runs._annotated_write(record, {'metadata': {'labels': {'a': 'b'}}})
    assert learned == [('MySQL', record.dependent)]
