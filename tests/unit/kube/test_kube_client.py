"""client: where the operator reads a watched object and patches its status, and the Warning Events it posts itself."""

import datetime

import kopf
import pytest

from ansible_kopf.kube import client


def test_a_namespaced_custom_resource_is_under_apis() -> None:
    mysqls = kopf.Resource('otus.homework', 'v1', 'mysqls', namespaced=True)
    assert (client.path(mysqls, namespace='ns', name='db', subresource='status')
            == '/apis/otus.homework/v1/namespaces/ns/mysqls/db/status')


def test_the_core_group_is_under_api() -> None:
    configmaps = kopf.Resource('', 'v1', 'configmaps', namespaced=True)
    assert client.path(configmaps, namespace='ns', name='cm') == '/api/v1/namespaces/ns/configmaps/cm'


def test_a_cluster_scoped_kind_has_no_namespace() -> None:
    nodes = kopf.Resource('', 'v1', 'nodes', namespaced=False)
    crds = kopf.Resource('apiextensions.k8s.io', 'v1', 'customresourcedefinitions', namespaced=False)
    assert client.path(nodes, namespace=None, name='n1') == '/api/v1/nodes/n1'
    assert (client.path(crds, namespace=None, name='x.y')
            == '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.y')


def test_the_authorization_is_refreshed_at_most_once_per_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    # kubernetes.client.Configuration's auth_settings() runs the refresh hook (the kubeconfig
    # re-read) on every call; the proxy asks for the header on every request.
    tokens = iter(['Bearer one', 'Bearer two'])

    class Configuration:
        host, verify_ssl, cert_file = 'https://api:6443/', False, None
        calls = 0

        def auth_settings(self) -> dict[str, dict[str, str]]:
            self.calls += 1
            return {'BearerToken': {'value': next(tokens)}}

    clock = [100.0]
    monkeypatch.setattr(client.time, 'monotonic', lambda: clock[0])
    configuration = Configuration()
    upstream = client.upstream_of(configuration)
    assert upstream.host == 'https://api:6443'
    assert [upstream.authorization() for _ in range(50)] == ['Bearer one'] * 50
    assert configuration.calls == 1
    clock[0] += client.AUTHORIZATION_TTL
    assert upstream.authorization() == 'Bearer two'  # a rotated token is read once the TTL is over
    assert configuration.calls == 2


def test_a_warning_event_names_the_object_it_is_about() -> None:
    """The Event a failed requeued run posts (kopf's posting works only in its handlers)."""
    obj = {'apiVersion': 'otus.homework/v1', 'kind': 'MySQLBackup',
           'metadata': {'name': 'bk', 'namespace': 'ns', 'uid': 'u-1'}}
    event = client.event(obj, reason='ReconcileFailed', message='Reconcile failed at task x',
                         now=datetime.datetime(2026, 11, 28, 10, 0, 1, tzinfo=datetime.UTC))
    assert event['type'] == 'Warning' and event['reason'] == 'ReconcileFailed'
    assert event['metadata'] == {'generateName': 'bk.', 'namespace': 'ns'}
    assert event['involvedObject'] == {'apiVersion': 'otus.homework/v1', 'kind': 'MySQLBackup',
                                       'name': 'bk', 'namespace': 'ns', 'uid': 'u-1'}
    assert event['lastTimestamp'] == '2026-11-28T10:00:01Z' and event['source'] == {'component': 'kopf'}
    cluster_scoped = client.event({'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'n'}},
                                  reason='r', message='m')
    assert cluster_scoped['metadata']['namespace'] == 'default'
