"""client.path: where the operator reads a watched object and patches its status."""

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
